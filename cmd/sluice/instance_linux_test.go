// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/enforcer"
)

// --state-dir on the default instance would share the machine's cgroup
// and pins (cleanup would remove them): refused. A named instance's is
// taken, and the default state directory stays accepted, as sluice-ci
// passes it explicitly.
func TestInstanceConfig(t *testing.T) {
	for _, tc := range []struct {
		instance, stateDir string
		wantErr            bool
		wantState          string
	}{
		{"", "", false, ""},
		{"", "/run/sluice", false, "/run/sluice"},
		{"", "/run/sluice/", false, "/run/sluice/"},
		{"", "/run/other", true, ""},
		{"", "/run/sluice/../other", true, ""},
		{"sluice-t1", "", false, "/run/sluice-t1"},
		{"sluice-t1", "/run/sluice-t1-job", false, "/run/sluice-t1-job"},
	} {
		t.Setenv(enforcer.InstanceEnv, tc.instance)
		cfg, err := instanceConfig(tc.stateDir)
		if tc.wantErr {
			if err == nil {
				t.Errorf("instance %q, state %q: accepted (cgroup %q, pins %q), want a refusal", tc.instance, tc.stateDir, cfg.CgroupName, cfg.PinDir)
			} else if !strings.Contains(err.Error(), enforcer.InstanceEnv) || !strings.Contains(err.Error(), tc.stateDir) {
				t.Errorf("refusal %q does not name the directory and %s", err, enforcer.InstanceEnv)
			}
			continue
		}
		if err != nil {
			t.Errorf("instance %q, state %q: %v", tc.instance, tc.stateDir, err)
			continue
		}
		if cfg.StateDir != tc.wantState {
			t.Errorf("instance %q, state %q: state %q, want %q", tc.instance, tc.stateDir, cfg.StateDir, tc.wantState)
		}
		if tc.instance != "" && (cfg.CgroupName != tc.instance || cfg.PinDir != "/sys/fs/bpf/"+tc.instance) {
			t.Errorf("instance %q: cgroup %q, pins %q: not the instance's own", tc.instance, cfg.CgroupName, cfg.PinDir)
		}
	}
}
