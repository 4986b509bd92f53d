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
// run unconfined. A fence is that other name, made by sluice and closed
// with cgroup.max.descendants 0: the engine cannot create the container's
// cgroup in it, so the container fails to start, with an error, instead of
// running unconfined. Opening a root lifts a fence left on its own name
// (OpenRoot, OpenSystemdRoot), so switching managers never locks sluice
// out of its own root.

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
	if err := writeFile(r.mount, name+"/cgroup.max.descendants", "0"); err != nil {
		return fmt.Errorf("cgroups: close fence %s: %w", r.FencePath(), err)
	}
	return nil
}

// Unfence removes the fence if it is empty; one that still holds cgroups
// is left (and reported), closed.
func (r *Root) Unfence() error {
	err := os.Remove(r.FencePath())
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("cgroups: remove fence %s: %w", r.FencePath(), err)
}

// liftFence opens the root's own directory to new children again, in case
// a daemon of the other manager fenced this name.
func (r *Root) liftFence() error {
	b, err := os.ReadFile(filepath.Join(r.Path(), "cgroup.max.descendants"))
	if err != nil || strings.TrimSpace(string(b)) != "0" {
		return nil
	}
	if err := writeFile(r.mount, r.rel("cgroup.max.descendants"), "max"); err != nil {
		return fmt.Errorf("cgroups: open root %s to sessions again (a fence of the other cgroup manager closed it): %w", r.Path(), err)
	}
	return nil
}
