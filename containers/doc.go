// SPDX-License-Identifier: Apache-2.0

// Package containers knows what container engines leave on a host: the
// cgroups they make for containers (by driver: a bare 64-hex-digit id with
// cgroupfs, docker-<id>.scope, cri-containerd-<id>.scope, crio-<id>.scope
// and libpod-<id>.scope with systemd), and the engine's own record of a
// container, from which the daemon reads the sluice.policy label.
//
// Decisions:
//   - A label is read from the engine's record on the host, never from
//     inside the container: the OCI bundle (config.json, whose annotations
//     carry containerd's, CRI's and podman's --annotation) and, for
//     Docker, config.v2.json in the engine's data root (docker run
//     --label), found through the bundle's own /etc/hostname mount. Both
//     files are root's and written by the engine before the container's
//     first process runs; a process in the container can change neither
//     (a label cannot be changed after start).
//   - The bundle is found from the container's processes without knowing
//     the engine's directories: their first ancestor outside the
//     container's cgroup is the engine's shim (containerd-shim-*, conmon),
//     which runs with the bundle as its working directory or names it with
//     --bundle. The ancestor must be root's, and the bundle's path must
//     name the container's id, so a process cannot point the daemon at a
//     bundle of its choosing.
//   - A record that cannot be read is an error, never "no label": the
//     caller decides what an unreadable record gets (the daemon: loopback
//     only, reported), so a narrowing label is never lost silently.
//
// Names and records are parsed platform-free (unit-tested); finding the
// bundle from /proc is Linux.
package containers
