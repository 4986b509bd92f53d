// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"bytes"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-dev/sluice/tests/world"
)

// TestContainerCallerRules: with --container-caller uid:0 the daemon (in
// the world's client namespace) starts a root caller's command from
// another network namespace in that caller's namespaces instead of
// refusing it; a caller in a user namespace of its own (a rootless
// container) is still refused, with the reason, even though the rule
// matches its uid. TestCallersElsewhereRefused is the daemon without the
// rule.
func TestContainerCallerRules(t *testing.T) {
	f := newFixtureFlags(t, []string{"--container-caller", "uid:0"})
	probe := world.BuildProbe(t)
	run := func(attr *syscall.SysProcAttr, cmd ...string) world.ProbeResult {
		t.Helper()
		c := exec.Command(probe, append([]string{"daemon-run", f.sock}, cmd...)...)
		c.SysProcAttr = attr
		var out bytes.Buffer
		c.Stdout = &out
		if err := c.Run(); err != nil {
			t.Logf("daemon-run: %v", err)
		}
		r, err := world.ParseProbeResult(out.Bytes())
		if err != nil {
			t.Fatalf("daemon-run: %v %q", err, out.String())
		}
		t.Logf("daemon-run -> %s", r.Line)
		return r
	}
	// From the test's own network namespace, not the daemon's.
	if r := run(nil, "/bin/true"); !r.OK {
		t.Errorf("a permitted caller in another network namespace: %s", r)
	}
	// In a user namespace of its own (uid 0 mapped to itself) and a
	// network namespace of its own.
	userns := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}}
	if r := run(userns, "/bin/true"); r.OK || !strings.Contains(r.Error, "another user namespace") {
		t.Errorf("a caller in another user namespace: %s, want a refusal naming it", r)
	}
	f.waitAudit(t, "session_refused", func(e map[string]any) bool {
		r, _ := e["reason"].(string)
		return strings.Contains(r, "another user namespace") && e["actor_uid"] == float64(0)
	})
}
