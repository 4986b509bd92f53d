// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"os"
	"path"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/tests/needs"
)

// TestInCgroup checks the exe attribution guard against this process's own
// /proc entry: its cgroup's name matches, any other name does not.
func TestInCgroup(t *testing.T) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		needs.Skip(t, "no /proc: %v", err)
	}
	var own, parent string
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own, parent = path.Base(p), path.Base(path.Dir(p))
		}
	}
	if own == "" {
		needs.Skip(t, "no cgroup v2 line in /proc/self/cgroup (mount cgroup2):\n%s", b)
	}
	pid := uint32(os.Getpid())
	if !inCgroup(pid, own) {
		t.Errorf("inCgroup(self, %q) = false", own)
	}
	// A cgroup below the session's (a container's) is in the session.
	if parent != "/" && parent != "." && !inCgroup(pid, parent) {
		t.Errorf("inCgroup(self, %q) = false for the parent cgroup", parent)
	}
	for _, other := range []string{"", "run-1-000000000000", own + "x"} {
		if inCgroup(pid, other) {
			t.Errorf("inCgroup(self, %q) = true", other)
		}
	}
	if inCgroup(1<<31, own) {
		t.Errorf("inCgroup of a pid that cannot exist = true")
	}
}
