#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs sluice for a GitHub Actions job: builds it from source at the
# action's ref (the BPF objects are committed, so Go is all it needs), or,
# with SLUICE_BIN set, installs that binary. Installs sluice-ci and builds
# sluice-shell, the steps' shell that `defaults.run.shell` names.
#   SLUICE_CI_PREFIX  where bin/ goes (default /usr/local)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
prefix=${SLUICE_CI_PREFIX:-/usr/local}
asroot() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo -n -- "$@"; fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ -n ${SLUICE_BIN:-} ]]; then
	cp -- "$SLUICE_BIN" "$tmp/sluice"
else
	command -v go >/dev/null || { echo "install.sh: no go in PATH (the action sets up Go from go.mod)" >&2; exit 1; }
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -buildid= -X main.version=$(git -C "$src" describe --always --dirty 2>/dev/null || echo action)" -o "$tmp/sluice" ./cmd/sluice)
fi
# The steps' shell: a static program, so nothing a step writes to
# $GITHUB_ENV (LD_PRELOAD, BASH_ENV) runs before the next step is confined.
(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -buildid=" -o "$tmp/sluice-shell" ./ci/sluice-shell)
asroot install -D -m 0755 "$tmp/sluice" "$prefix/bin/sluice"
asroot install -D -m 0755 "$src/ci/sluice-ci" "$prefix/bin/sluice-ci"
asroot install -D -m 0755 "$tmp/sluice-shell" "$prefix/bin/sluice-shell"
asroot install -d -m 0755 "$prefix/etc"
"$prefix/bin/sluice" version
