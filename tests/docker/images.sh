#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Local images for the docker tests, with no registry: every docker test (and the CI) gets its
# images here, so there is one way to make them.
#
#   tests/docker/images.sh base     sluice-ci/debian:bookworm  debootstrap --variant=minbase
#   tests/docker/images.sh go       sluice-ci/golang:bookworm  the same plus /usr/local/go
#   tests/docker/images.sh sluice   sluice-ci/sluice:test      this checkout's Dockerfile, built
#                                                              from the two above
#   tests/docker/images.sh mirror   prints the Debian mirror the images come from, for scripts
#                                   that debootstrap a root file system of their own
#   tests/docker/images.sh rootfs   makes (once per cache) the minbase tarball the base image is
#                                   imported from and prints its path, for engines a test starts
#                                   elsewhere (tests/systemd runs one under systemd)
#
# It talks to the engine named by DOCKER_HOST (tests start their own dockerd, see
# tests/dockertest). Images that exist are kept. The debootstrap root file system is cached as a
# tarball in $SLUICE_DOCKER_CACHE (default /var/tmp/sluice-docker-cache), so one CI job
# bootstraps once however many private engines its tests start; a lock serialises runs.
#
# The mirror is the machine's own configured Debian mirror (/etc/apt/sources.list*), never a
# hard-coded one. The containers do not trust the host's certificates and reach no network, so
# the Go build inside `docker build` uses modules vendored on the host (GOFLAGS=-mod=vendor).
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${SLUICE_DOCKER_CACHE:-/var/tmp/sluice-docker-cache}"
suite="${SLUICE_DEBIAN_SUITE:-bookworm}"
docker="${DOCKER:-docker}"
base_image="sluice-ci/debian:$suite"
go_image="sluice-ci/golang:$suite"
sluice_image="${SLUICE_IMAGE:-sluice-ci/sluice:test}"
goroot="${SLUICE_GOROOT:-$(go env GOROOT 2>/dev/null || echo /usr/local/go)}"

die() { echo "images.sh: $*" >&2; exit 1; }

have_image() { "$docker" image inspect "$1" >/dev/null 2>&1; }

# mirror prints the first Debian archive URI the machine's apt is configured with (deb822
# .sources or one-line .list format).
mirror() {
	local f uri
	for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		case "$f" in
		*.sources) uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f") ;;
		*) uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($i !~ /security/) print $i; break } }' "$f" | head -n1) ;;
		esac
		if [ -n "$uri" ]; then
			echo "$uri"
			return
		fi
	done
	die "no Debian mirror configured in /etc/apt/sources.list*"
}

# rootfs_tar makes (once per cache) the minbase root file system tarball and prints its path.
rootfs_tar() {
	local tar="$cache/debian-$suite-minbase.tar"
	mkdir -p "$cache"
	exec 9>"$cache/.lock"
	flock 9
	if [ ! -s "$tar" ]; then
		command -v debootstrap >/dev/null || die "debootstrap is not installed"
		local dir
		dir=$(mktemp -d "$cache/rootfs.XXXXXX")
		echo "images.sh: debootstrap --variant=minbase $suite from $(mirror)" >&2
		if ! debootstrap --variant=minbase "$suite" "$dir" "$(mirror)" >"$dir.log" 2>&1; then
			tail -n 20 "$dir.log" >&2
			rm -rf "$dir" "$dir.log"
			die "debootstrap failed"
		fi
		# Package caches and lists are of no use to the tests; a smaller import is faster.
		rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* \
			"$dir"/usr/share/locale/* "$dir"/usr/share/man/*
		tar -C "$dir" -cf "$tar.tmp" .
		mv "$tar.tmp" "$tar"
		rm -rf "$dir" "$dir.log"
	fi
	flock -u 9
	echo "$tar"
}

base() {
	have_image "$base_image" && return
	local tar
	tar=$(rootfs_tar)
	"$docker" import "$tar" "$base_image" >/dev/null
}

go_image() {
	have_image "$go_image" && return
	[ -x "$goroot/bin/go" ] || die "no Go toolchain at $goroot"
	base
	local cid
	cid=$("$docker" create --network none "$base_image" /bin/true)
	# shellcheck disable=SC2064
	trap "'$docker' rm -f $cid >/dev/null 2>&1" RETURN
	"$docker" cp "$goroot" "$cid:/usr/local/go"
	"$docker" commit -c 'ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		-c 'ENV GOTOOLCHAIN=local' -c 'ENV GOPROXY=off' "$cid" "$go_image" >/dev/null
}

# sluice builds this checkout's Dockerfile, as a user would, from a copy of the work tree
# (tracked and untracked files, not ignored ones) plus the modules vendored on the host: the
# checkout itself never gets a vendor/ directory that would change how `go build` works in it.
sluice() {
	base
	go_image
	local ctx
	ctx=$(mktemp -d "${TMPDIR:-/tmp}/sluice-context.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$ctx'" RETURN
	(cd "$repo" && git ls-files -z -co --exclude-standard |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
		tar --null -T - -cf -) | tar -C "$ctx" -xf -
	(cd "$repo" && GOFLAGS=-mod=mod go mod vendor -o "$ctx/vendor")
	"$docker" build -q --network none -t "$sluice_image" \
		--build-arg GO_IMAGE="$go_image" --build-arg BASE_IMAGE="$base_image" \
		--build-arg GOFLAGS=-mod=vendor --build-arg VERSION=test "$ctx" >/dev/null
}

case "${1:-}" in
base | go_image | sluice | mirror) "$1" ;;
rootfs) rootfs_tar ;;
go) go_image ;;
*) die "usage: $0 base|go|sluice|mirror" ;;
esac
