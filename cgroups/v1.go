// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"slices"
	"strings"
)

// v1Move is one cgroup v1 hierarchy a process should leave: where its
// root cgroup is mounted, and the process's cgroup in it now.
type v1Move struct {
	mountPoint string
	from       string
}

// v1Moves returns the v1 hierarchies, among those mounted with their whole
// tree visible (root "/"), in which the process whose /proc/<pid>/cgroup is
// procCgroup sits below the root. Named hierarchies (name=systemd) are
// left out when keepNamed is set: systemd tracks its units through them.
func v1Moves(entries []mountEntry, procCgroup string, keepNamed bool) []v1Move {
	var out []v1Move
	for _, line := range strings.Split(procCgroup, "\n") {
		// hierarchy-ID:controller-list:cgroup-path; v2 is "0::path".
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] == "" || parts[2] == "/" {
			continue
		}
		controllers := strings.Split(parts[1], ",")
		named := strings.HasPrefix(parts[1], "name=")
		if named && keepNamed {
			continue
		}
		for i, e := range entries {
			if e.fsType != "cgroup" || e.root != "/" || shadowed(entries, i) {
				continue
			}
			if containsAll(e.superOpts, controllers) {
				out = append(out, v1Move{mountPoint: e.mountPoint, from: parts[2]})
				break
			}
		}
	}
	return out
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
