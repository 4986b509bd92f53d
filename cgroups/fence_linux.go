// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Fences: the other form of sluice's cgroup parent.
//
// A container engine makes the parent a user names with --cgroup-parent if
// it is missing. sluice's root is either the cgroup <instance> (cgroupfs)
// or the slice <instance>.slice (systemd); the other name, given by
// mistake (a recipe for the other kind of host), would be made by the
// engine as an ordinary cgroup outside the datapath: its containers would
// run unconfined. A fence is that other name, made by sluice and closed:
//   - cgroup.freeze 1: a cgroup created below a frozen one is frozen, and
//     so is a process moved into it, so the container's first process
//     stops before its first instruction (the daemon then kills it, and
//     the engine's start fails with an error);
//   - on a pure cgroup v2 host also cgroup.max.descendants 0: the engine
//     cannot create the container's cgroup at all and fails at once. Not
//     on a hybrid host: there runc takes a failed cgroup v2 mkdir as "no
//     cgroup v2" and leaves the container in the v2 root, unfrozen (measured
//     here), so the freeze is the fence.
//
// Opening a root lifts a fence left on its own name (OpenRoot,
// OpenSystemdRoot), so switching managers never locks sluice out of its
// own root.

// FenceName is the other form of the root's name: the slice name on a
// cgroupfs root, the cgroupfs name on a systemd one.
func (r *Root) FenceName() string {
	if r.slice != "" {
		return strings.TrimSuffix(r.slice, ".slice")
	}
	return SliceName(r.name)
}

// FencePath is the fence's absolute cgroupfs path.
func (r *Root) FencePath() string { return filepath.Join(r.mount, r.FenceName()) }

// Fence makes the fence (FenceName) and closes it. A fence that exists
// already is closed again; what is below it already (containers placed
// there before the fence was made) is left to the caller, which finds
// them with FencePath.
func (r *Root) Fence() error {
	name := r.FenceName()
	if err := validName(name); err != nil {
		return fmt.Errorf("cgroups: fence: %w", err)
	}
	if err := mkdirBeneath(r.mount, "", name); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cgroups: create fence %s: %w", r.FencePath(), err)
	}
	if err := writeFile(r.mount, name+"/cgroup.freeze", "1"); err != nil {
		return fmt.Errorf("cgroups: close fence %s: %w", r.FencePath(), err)
	}
	if len(V1Hierarchies()) == 0 {
		if err := writeFile(r.mount, name+"/cgroup.max.descendants", "0"); err != nil {
			return fmt.Errorf("cgroups: close fence %s: %w", r.FencePath(), err)
		}
	}
	return nil
}

// Unfence removes the fence and the empty cgroups an engine left in it
// (a refused container's); one that still holds processes is left, closed,
// and reported.
func (r *Root) Unfence() error {
	if entries, err := os.ReadDir(r.FencePath()); err == nil {
		for _, de := range entries {
			if de.IsDir() {
				_ = os.Remove(filepath.Join(r.FencePath(), de.Name()))
			}
		}
	}
	err := os.Remove(r.FencePath())
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("cgroups: remove fence %s: %w", r.FencePath(), err)
}

// liftFence opens the root's own directory to new children again, and
// thaws it, in case a daemon of the other manager fenced this name.
func (r *Root) liftFence() error {
	// file -> {its fenced value, its open value}
	for file, v := range map[string][2]string{"cgroup.max.descendants": {"0", "max"}, "cgroup.freeze": {"1", "0"}} {
		b, err := os.ReadFile(filepath.Join(r.Path(), file))
		if err != nil || strings.TrimSpace(string(b)) != v[0] {
			continue
		}
		if err := writeFile(r.mount, r.rel(file), v[1]); err != nil {
			return fmt.Errorf("cgroups: open root %s to sessions again (a fence of the other cgroup manager closed it): %w", r.Path(), err)
		}
	}
	return nil
}
