// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"strings"
	"testing"
)

// TestConfigFromEnv checks the instance switch tests rely on: a valid
// name selects its own cgroup, pins and state; a bad one is refused
// before anything could be created under a path built from it.
func TestConfigFromEnv(t *testing.T) {
	t.Setenv(InstanceEnv, "")
	if cfg, err := ConfigFromEnv(); err != nil || cfg != (Config{}) {
		t.Fatalf("unset: %+v, %v; want the zero Config (the default instance)", cfg, err)
	}
	if d := (Config{}).WithDefaults(); d.CgroupName != "sluice" || d.StateDir != "/run/sluice" || d.PinDir == "" {
		t.Errorf("defaults = %+v", d)
	}
	t.Setenv(InstanceEnv, "sluice-test-1")
	cfg, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Config{CgroupName: "sluice-test-1", PinDir: "/sys/fs/bpf/sluice-test-1", StateDir: "/run/sluice-test-1"}); cfg != want {
		t.Errorf("cfg = %+v, want %+v", cfg, want)
	}
	for _, bad := range []string{"../etc", "a/b", "Upper", "1abc", "-x", "a b", strings.Repeat("a", 64)} {
		t.Setenv(InstanceEnv, bad)
		if cfg, err := ConfigFromEnv(); err == nil {
			t.Errorf("%s=%q accepted: %+v", InstanceEnv, bad, cfg)
		}
	}
}
