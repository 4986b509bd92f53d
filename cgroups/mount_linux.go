// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mountinfoPath is read rather than assumed paths such as /sys/fs/cgroup:
// hybrid machines mount cgroup2 elsewhere (/sys/fs/cgroup/unified).
const mountinfoPath = "/proc/self/mountinfo"

// Mount returns the cgroup2 mount point of this process's mount namespace, as
// listed in /proc/self/mountinfo (see ParseMountInfo for the choice among
// several) and confirmed with statfs. It wraps ErrNoCgroup2, with the command
// that fixes it, when none is mounted.
func Mount() (string, error) {
	mount, _, err := findMount()
	return mount, err
}

// findMount also returns the parsed entries, which OpenRoot uses to explain
// controllers bound to cgroup v1.
func findMount() (string, []mountEntry, error) {
	f, err := os.Open(mountinfoPath)
	if err != nil {
		return "", nil, fmt.Errorf("cgroups: %w", err)
	}
	defer f.Close()
	entries, err := parseMountInfo(f)
	if err != nil {
		return "", nil, err
	}
	cands := cgroup2Candidates(entries)
	if len(cands) == 0 {
		return "", nil, fmt.Errorf("%w (none in %s); mount it with `mkdir -p /sys/fs/cgroup/unified && mount -t cgroup2 none /sys/fs/cgroup/unified` (any empty directory will do), or boot with systemd.unified_cgroup_hierarchy=1", ErrNoCgroup2, mountinfoPath)
	}
	for _, c := range cands {
		var st unix.Statfs_t
		if unix.Statfs(c.mountPoint, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return c.mountPoint, entries, nil
		}
	}
	return "", nil, fmt.Errorf("%w: %s lists cgroup2 at %s, but statfs does not find cgroup2 there", ErrNoCgroup2, mountinfoPath, cands[0].mountPoint)
}
