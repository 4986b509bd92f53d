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
	switch _, err := enforcer.OpenExistingRoot(cfg.CgroupName); {
	case err == nil:
		found = true
	case errors.Is(err, os.ErrNotExist), errors.Is(err, cgroups.ErrNoCgroup2):
	default:
		return false, err
	}
	if !found {
		return false, nil
	}
	return true, enforcer.Cleanup(cfg)
}
