#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The .deb on a fresh Debian: builds this machine's .deb, a minimal Debian
# root file system (debootstrap --variant=minbase from the configured
# mirror, imported with `docker import`, no registry), starts a private
# dockerd without any networking of its own, and in a container with no
# network: installs the package, runs `sluice check`, starts the daemon by
# hand (no systemd there), runs a confined command, purges the package and
# checks that nothing is left: no files, group, cgroups or pins. Before
# that, lintian and rpmlint on the .deb and the .rpm, with no finding. Then
# README's `make demo` in a fresh Debian with exactly README's packages.
#
#   packaging/test-deb.sh [WORKDIR]     as root; WORKDIR keeps the package build and dockerd
#                                       state; the root file system is cached by
#                                       tests/docker/images.sh ($SLUICE_DOCKER_CACHE)
#
# The container needs what the datapath needs (docs/containers.md, "sluice, and its test suite, in a
# container without the daemon image"):
# --cap-add SYS_ADMIN,NET_ADMIN,SYS_PTRACE (SYS_ADMIN covers bpf(2); docker 20.10
# does not know CAP_BPF), the host's cgroup2
# mount and bpffs, and no seccomp/AppArmor profile (bpf(2), mount(2)).
# Only the dockerd this script started is stopped, by its pid.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
own=
if [[ -n ${1:-} ]]; then
	work=$1
	mkdir -p "$work"
else
	work=$(mktemp -d /tmp/sluice-test-deb-XXXXXX)
	own=1
fi
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")

step() { printf '\n== %s\n' "$*"; }

step "the packages"
packaging/release.sh --host "$work/dist" >/dev/null
deb=$(ls "$work"/dist/sluice_*.deb)
rpm=$(ls "$work"/dist/sluice-*.rpm)
echo "$deb"
echo "$rpm"

# The ecosystems' own linters, clean: what must stay is overridden with
# its reason (packaging/lintian-overrides, packaging/rpmlint.toml). lintian
# warns on stderr that it runs as root; that line is not a finding.
step "lintian and rpmlint"
lintian --fail-on error,warning --pedantic "$deb" 2> >(grep -v 'running with root privileges' >&2)
out=$(rpmlint -c packaging/rpmlint.toml "$rpm") || { echo "$out" >&2; exit 1; }
echo "$out" | tail -1
[[ $out == *" 0 errors, 0 warnings"* ]] || { echo "$out" >&2; exit 1; }

step "a private dockerd (no bridge, no iptables)"
sock=$work/docker.sock
dockerd --host "unix://$sock" --data-root "$work/docker" --exec-root "$work/docker-exec" --pidfile "$work/dockerd.pid" \
	--bridge=none --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false >"$work/dockerd.log" 2>&1 &
dockerd_pid=$!
cleanup() {
	kill "$dockerd_pid" 2>/dev/null || true
	for _ in $(seq 150); do [[ -e /proc/$dockerd_pid ]] || break; sleep 0.1; done
	if [[ -n $own ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT
docker() { command docker --host "unix://$sock" "$@"; }
for _ in $(seq 150); do docker version >/dev/null 2>&1 && break; sleep 0.2; done
docker version --format 'docker {{.Server.Version}}'
step "a fresh Debian ($suite, minbase)"
# The one way the tests make a base image (tests/docker/images.sh): debootstrap
# from the configured mirror, imported with no registry. Its root file system
# is cached for the whole CI job, so the container tests' debootstrap serves
# this script too.
image=sluice-ci/debian:$suite
DOCKER_HOST="unix://$sock" SLUICE_DEBIAN_SUITE="$suite" tests/docker/images.sh base

# A random instance: the test never touches a real installation's pins
# or cgroups on this host.
instance=sluice-deb-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
cgmount=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
[[ -n $cgmount ]] || { echo "test-deb: no cgroup2 mount" >&2; exit 1; }

step "install, check, daemon, a confined command, purge (in a container with no network)"
docker run --rm --network none --pid host \
	--cap-add SYS_ADMIN --cap-add NET_ADMIN --cap-add SYS_PTRACE \
	--security-opt seccomp=unconfined --security-opt apparmor=unconfined \
	-v "$cgmount:$cgmount" -v /sys/fs/bpf:/sys/fs/bpf \
	-v "$deb:/tmp/sluice.deb:ro" -v "$root/packaging/test-deb-inside.sh:/test.sh:ro" \
	-e SLUICE_INSTANCE="$instance" -e CGMOUNT="$cgmount" \
	"$image" /bin/bash /test.sh

step "nothing left on the host"
left=0
for p in "/sys/fs/bpf/$instance" "$cgmount/$instance"; do
	if [[ -e $p ]]; then echo "left behind: $p" >&2; left=1; fi
done
[[ $left -eq 0 ]]

# README's promise: its commands work on a fresh Debian with Go and exactly
# the packages it lists (.ci/packages reads them from README). `make demo`
# there, from a copy of this checkout, with the host's Go, module cache
# (read-only; the container has no network) and build cache.
pkgs=$(.ci/packages)
step "make demo on a fresh Debian with exactly README's packages: $pkgs"
# The packages go in with README's own command, apt-get in the fresh root,
# not with debootstrap --include, whose resolver takes no alternatives
# (systemd-container's "default-dbus-system-bus | dbus-system-bus") and
# would fail where apt-get succeeds.
if [[ ! -e $work/rootfs-readme/usr/bin/make ]]; then
	rm -rf "$work/rootfs-readme"
	mirror=$(tests/docker/images.sh mirror)
	{
		debootstrap --variant=minbase "$suite" "$work/rootfs-readme" "$mirror" &&
			cp /etc/resolv.conf "$work/rootfs-readme/etc/resolv.conf" &&
			chroot "$work/rootfs-readme" apt-get update -qq &&
			chroot "$work/rootfs-readme" env DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -qq --no-install-recommends $pkgs &&
			chroot "$work/rootfs-readme" apt-get clean
	} >"$work/debootstrap-readme.log" 2>&1 || { tail -20 "$work/debootstrap-readme.log" >&2; exit 1; }
fi
tar -C "$work/rootfs-readme" -c . | docker import - "$image-readme" >/dev/null
rm -rf "$work/src"
mkdir -p "$work/src"
git ls-files -z | tar --null -T - -c | tar -x -C "$work/src"
goroot=$(go env GOROOT)
docker run --rm --network none --pid host \
	--cap-add SYS_ADMIN --cap-add NET_ADMIN --cap-add SYS_PTRACE \
	--security-opt seccomp=unconfined --security-opt apparmor=unconfined \
	-v "$cgmount:$cgmount" -v /sys/fs/bpf:/sys/fs/bpf \
	-v "$goroot:/usr/local/go:ro" -v "$(go env GOMODCACHE):/root/go/pkg/mod:ro" -v "$(go env GOCACHE):/root/.cache/go-build" \
	-v "$work/src:/src" -w /src \
	-e PATH=/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin -e GOFLAGS=-mod=mod -e GOPROXY=off \
	"$image-readme" make demo >"$work/demo.log" 2>&1 || { tail -30 "$work/demo.log" >&2; exit 1; }
grep -q '^ok: the confined shell reached' "$work/demo.log" || { tail -30 "$work/demo.log" >&2; exit 1; }
tail -3 "$work/demo.log"
echo "test-deb: ok"
