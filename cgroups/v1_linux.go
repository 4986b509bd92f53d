// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LeaveV1 moves the calling process into the root cgroup of every cgroup v1
// hierarchy it sits below the root of, on hybrid layouts, and returns the
// mount points it moved in.
//
// Why: a session's processes are spawned by the daemon with
// CLONE_INTO_CGROUP, which sets their cgroup v2 only; in every v1
// hierarchy they inherit the daemon's cgroups. When the daemon runs in a
// container on a hybrid host, those are the container's, and stopping or
// restarting the container kills whatever is left in them (runc reads the
// container's processes from its v1 cgroups): every session would die with
// the daemon's container, although the datapath keeps it confined. Out of
// the container's v1 cgroups, sessions outlive it and the next daemon
// re-adopts them. Confinement does not depend on v1 at all.
//
// Named hierarchies (name=systemd) are kept when PID 1 is systemd, which
// tracks its units through them. Hierarchies whose root is not visible
// (mounted from another cgroup namespace, or read-only) are skipped: the
// error lists what could not be moved, and the caller decides whether to
// warn.
func LeaveV1() ([]string, error) {
	entries, err := readMountInfo()
	if err != nil {
		return nil, err
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	var moved, failed []string
	pid := strconv.Itoa(os.Getpid())
	for _, m := range v1Moves(entries, string(self), SystemdIsInit()) {
		if err := os.WriteFile(filepath.Join(m.mountPoint, "cgroup.procs"), []byte(pid), 0); err != nil {
			failed = append(failed, fmt.Sprintf("%s (from %s): %v", m.mountPoint, m.from, err))
			continue
		}
		moved = append(moved, m.mountPoint)
	}
	if len(failed) > 0 {
		return moved, fmt.Errorf("cgroups: could not leave the v1 cgroups %s", strings.Join(failed, "; "))
	}
	return moved, nil
}

// SystemdIsInit reports whether PID 1 (of this pid namespace) is systemd,
// the test sd_booted(3) makes.
func SystemdIsInit() bool {
	st, err := os.Stat("/run/systemd/system")
	return err == nil && st.IsDir()
}

func readMountInfo() ([]mountEntry, error) {
	f, err := os.Open(mountinfoPath)
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	defer f.Close()
	return parseMountInfo(f)
}

// V1Hierarchies lists the mount points of the cgroup v1 hierarchies this
// process can see: empty on a pure cgroup v2 host, the v1 controllers of a
// hybrid layout otherwise.
func V1Hierarchies() []string {
	entries, err := readMountInfo()
	if err != nil {
		return nil
	}
	var out []string
	for i, e := range entries {
		if e.fsType == "cgroup" && !shadowed(entries, i) {
			out = append(out, e.mountPoint)
		}
	}
	return out
}
