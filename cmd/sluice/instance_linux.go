// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"path/filepath"

	"github.com/sluice-dev/sluice/enforcer"
)

// defaultStateDir is the default instance's state directory (enforcer's
// Config.WithDefaults).
const defaultStateDir = "/run/sluice"

// instanceConfig is the enforcer configuration of the instance that
// SLUICE_INSTANCE names, with stateDir (--state-dir, "" for the instance's
// own) in it.
//
// Only SLUICE_INSTANCE isolates an instance: it names the cgroup, the pins
// and the state directory together. --state-dir moves the state files
// alone, so on the default instance (no SLUICE_INSTANCE) a state directory
// other than /run/sluice is refused rather than taken: a daemon there would
// share the machine's datapath with the real daemon, and
// `sluice cleanup --state-dir X` would remove the machine's cgroup and pins
// while seeming to clean up X. A named instance may keep its state where
// its owner says (CI jobs do), since every object it touches is its own.
// --socket stays free on every instance: it moves only the API endpoint.
func instanceConfig(stateDir string) (enforcer.Config, error) {
	cfg, err := enforcer.ConfigFromEnv()
	if err != nil {
		return enforcer.Config{}, err
	}
	if stateDir == "" {
		return cfg, nil
	}
	if cfg.CgroupName == "" && filepath.Clean(stateDir) != defaultStateDir {
		return enforcer.Config{}, fmt.Errorf("state directory %s: without %s the cgroup and pins stay the default instance's (/sys/fs/bpf/sluice), so it would not isolate anything; set %s=NAME for an instance of its own (state in /run/NAME), or leave the state directory at %s",
			stateDir, enforcer.InstanceEnv, enforcer.InstanceEnv, defaultStateDir)
	}
	cfg.StateDir = stateDir
	return cfg, nil
}
