#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# rootfs.sh makes (once per cache) a Debian root file system with systemd, for the systemd
# test (tests/systemd) to boot with systemd-nspawn, and prints the tarball's path:
#   debootstrap --variant=minbase --include=systemd,dbus  from the machine's configured mirror.
# The tarball is cached in $SLUICE_DOCKER_CACHE (default /var/tmp/sluice-docker-cache), beside
# tests/docker/images.sh's minbase one, under the same lock.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${SLUICE_DOCKER_CACHE:-/var/tmp/sluice-docker-cache}"
suite="${SLUICE_DEBIAN_SUITE:-bookworm}"
die() { echo "rootfs.sh: $*" >&2; exit 1; }

# The mirror the machine's apt uses (the same rule as tests/docker/images.sh).
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

tar="$cache/debian-$suite-systemd.tar"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -w 900 9 || die "cache lock busy"
if [ ! -s "$tar" ]; then
	command -v debootstrap >/dev/null || die "debootstrap is not installed"
	dir=$(mktemp -d "$cache/rootfs-systemd.XXXXXX")
	echo "rootfs.sh: debootstrap --variant=minbase --include=systemd,dbus $suite from $(mirror)" >&2
	if ! timeout 900 debootstrap --variant=minbase --include=systemd,dbus "$suite" "$dir" "$(mirror)" >"$dir.log" 2>&1; then
		tail -n 20 "$dir.log" >&2
		rm -rf "$dir" "$dir.log"
		die "debootstrap failed"
	fi
	rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* \
		"$dir"/usr/share/locale/* "$dir"/usr/share/man/*
	chmod 755 "$dir" # mktemp made it 0700; tar records it as the root directory
	tar -C "$dir" -cf "$tar.tmp" .
	mv "$tar.tmp" "$tar"
	rm -rf "$dir" "$dir.log"
fi
flock -u 9
echo "$tar"
