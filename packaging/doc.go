// SPDX-License-Identifier: Apache-2.0

// Package packaging holds what turns sluice into something users install:
// the systemd unit and default configuration (installed by `make install`
// and the packages), the nfpm configuration and scripts of the .deb and
// .rpm, and release.sh, which `make release` runs: static binaries for
// Linux, macOS and Windows, the packages, and SHA256SUMS, reproducibly.
// The nfpm tool lives in its own module (packaging/nfpm) so that sluice's
// module does not depend on it.
package packaging
