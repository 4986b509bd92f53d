// SPDX-License-Identifier: Apache-2.0

// Package systemd tests sluice on a host whose PID 1 is systemd: it boots
// Debian's systemd in a systemd-nspawn container (no network but loopback),
// installs the packaged unit and a sluice binary built from this tree, and
// runs inside.sh there, which checks that sessions are transient scopes in
// sluice.slice, that they stay confined, and that `systemctl restart sluice`
// re-adopts them. inside-docker.sh does the same for Docker's systemd
// cgroup driver, inside-kubernetes.sh for `sluice node` on a Kubernetes
// node whose kubelet and containerd use the systemd cgroup driver.
package systemd
