// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"fmt"
	"path"
	"strings"
)

// wantedControllers are the ones whose limits sluice offers (--pids-max,
// --memory-max). Others (cpu, io) are left alone: enabling a controller in a
// subtree has a cost and nothing here would use them.
var wantedControllers = []string{"memory", "pids"}

// enableControllers enables the controllers in want for the root's children
// and records the outcome. Only failing to read the interface files is an error;
// a controller that cannot be enabled is recorded with its reason.
func (r *Root) enableControllers(want []string, entries []mountEntry) error {
	offered, err := readList(r.mount, "cgroup.controllers")
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	enabledAtTop, err := readList(r.mount, "cgroup.subtree_control")
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	r.unavailable = make(map[string]string)
	for _, c := range want {
		if !offered[c] {
			r.unavailable[c] = whyNotOffered(r.mount, c, entries)
			continue
		}
		// The root's children can only get what the root itself was given by
		// its parent, the mount root.
		if !enabledAtTop[c] {
			if err := writeFile(r.mount, "cgroup.subtree_control", "+"+c); err != nil {
				r.unavailable[c] = fmt.Sprintf("enabling it in the cgroup2 mount root failed (a mount root that holds processes cannot enable controllers for its children): %v", err)
				continue
			}
		}
		if err := writeFile(r.mount, r.rel("cgroup.subtree_control"), "+"+c); err != nil {
			r.unavailable[c] = fmt.Sprintf("enabling it for sessions failed: %v", err)
		}
	}
	// Trust the kernel's view over the outcome of our writes.
	enabled, err := readList(r.mount, r.rel("cgroup.subtree_control"))
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	r.controllers = nil
	for _, c := range want {
		if enabled[c] {
			r.controllers = append(r.controllers, c)
			delete(r.unavailable, c)
		} else if r.unavailable[c] == "" {
			r.unavailable[c] = fmt.Sprintf("%s does not list it", path.Join(r.mount, r.rel("cgroup.subtree_control")))
		}
	}
	return nil
}

// whyNotOffered explains a controller missing from the mount root's
// cgroup.controllers, naming the v1 hierarchy that holds it when there is one.
func whyNotOffered(mount, controller string, entries []mountEntry) string {
	if v1 := v1MountOf(entries, controller); v1 != "" {
		return fmt.Sprintf("it is bound to the cgroup v1 hierarchy mounted at %s (a hybrid layout), and a controller serves one hierarchy at a time, so cgroup2 at %s cannot offer it; boot with systemd.unified_cgroup_hierarchy=1 to use it", v1, mount)
	}
	return fmt.Sprintf("%s does not list it (the kernel lacks it, it is disabled with cgroup_disable=, or the parent cgroup does not delegate it)", path.Join(mount, "cgroup.controllers"))
}

// readList reads a space-separated cgroupfs list such as cgroup.controllers.
func readList(mount, rel string) (map[string]bool, error) {
	b, err := readFile(mount, rel)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool)
	for _, f := range strings.Fields(string(b)) {
		set[f] = true
	}
	return set, nil
}
