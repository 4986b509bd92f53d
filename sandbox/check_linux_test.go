// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"os"
	"testing"

	"github.com/sluice-dev/sluice/tests/needs"
)

// TestCheckAsRoot: on a machine with Landlock and mount namespaces (CI's),
// Check tries both layers for real and finds them working.
func TestCheckAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		needs.Skip(t, "sandbox: Check mounts in a mount namespace of its own, which needs root (CI runs as root)")
	}
	layers := Check()
	if len(layers) != 2 {
		t.Fatalf("layers %+v", layers)
	}
	for _, l := range layers {
		t.Logf("%s: %d %s", l.Name, l.Level, l.Detail)
	}
	if layers[1].Level != Full {
		t.Errorf("path hiding: %+v", layers[1])
	}
	switch abi := LandlockABI(); {
	case abi >= 6 && layers[0].Level != Full:
		t.Errorf("process isolation with Landlock ABI %d: %+v", abi, layers[0])
	case abi == 0 && layers[0].Level != Missing:
		t.Errorf("process isolation without Landlock: %+v", layers[0])
	}
	// Check's namespace was the throwaway thread's: the host's /proc and
	// files are untouched.
	if _, err := os.Stat("/proc/1/status"); err != nil {
		t.Errorf("after Check, /proc/1 is gone here: %v", err)
	}
}
