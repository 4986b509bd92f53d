// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"os"

	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/enforcer"
)

// cleanup removes what sluice left and reports whether there was anything:
// a session cgroup tree, pins or state files. Finding nothing is success
// (a machine without cgroup2 cannot have a sluice cgroup); failing to look
// or to remove is not.
func cleanup(stateDir string) (found bool, err error) {
	if os.Geteuid() != 0 {
		return false, errors.New("cleanup needs root")
	}
	cfg, err := instanceConfig(stateDir)
	if err != nil {
		return false, err
	}
	cfg = cfg.WithDefaults()
	for _, p := range []string{cfg.PinDir, cfg.StateDir} {
		switch _, err := os.Lstat(p); {
		case err == nil:
			found = true
		case !errors.Is(err, os.ErrNotExist):
			return false, err
		}
	}
	root, err := enforcer.OpenExistingRoot(cfg.CgroupName)
	switch {
	case err == nil:
		found = true
	case errors.Is(err, os.ErrNotExist), errors.Is(err, cgroups.ErrNoCgroup2):
	default:
		return false, err
	}
	if !found {
		return false, nil
	}
	if err := enforcer.Cleanup(cfg); err != nil {
		return true, err
	}
	// The daemon's fence of the other form of the root's name
	// (cgroups.Root.Fence); one that still holds a container is reported.
	if root != nil {
		return true, root.Unfence()
	}
	return true, nil
}
