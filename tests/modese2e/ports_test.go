// SPDX-License-Identifier: Apache-2.0

//go:build linux

package modese2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// TestPortRulesThroughProxy: in Landlock mode (whose TCP rules are per
// port on every address, so the allowlist's ports cannot be given to it:
// it lets connect reach only the proxy) and through a BPF session's proxy,
// the proxy refuses a port outside the entry's "ports" with a 403 naming
// the rule, and the world records nothing; the rule's own port, on the same
// address, is reached and recorded.
func TestPortRulesThroughProxy(t *testing.T) {
	w := world.New(t)
	probe := world.BuildProbe(t)
	ok, no := w.ListenTCP(t, world.AllowedV4), w.ListenTCP(t, world.AllowedV4)
	dir, err := os.MkdirTemp("", "sluice-modes-ports-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "network_allowlist.json")
	body := fmt.Sprintf(`{"allowed_hosts": [{"host": "203.0.113.0/24", "ports": ["%d/tcp", "1-10"]}]}`, ok)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	rule := fmt.Sprintf(`port %d is not in the rule "203.0.113.0/24" ports 1-10,%d/tcp`, no, ok)
	for _, mode := range []struct {
		name         string
		unprivileged bool
		flags        []string
	}{
		{"landlock", true, []string{"run", "--mode", "landlock", "--allowlist", file, "--"}},
		{"bpf-proxy", false, []string{"run", "--user", "65534:65534", "--allowlist", file, "--"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			start := time.Now()
			r, stderr, _ := run(t, w, mode.unprivileged, append(mode.flags, probe, "proxy-connect", world.AllowedV4.String(), fmt.Sprint(no))...)
			if r.OK || !strings.Contains(r.Error, "403") || !strings.Contains(stderr, rule) {
				t.Errorf("a port outside the rule through the proxy: %s\n%s", r, stderr)
			}
			w.AssertNothingArrived(t, world.All(world.Since(start), world.ToPort(world.AllowedV4, no)), 300*time.Millisecond)
			start = time.Now()
			r, _, _ = run(t, w, mode.unprivileged, append(mode.flags, probe, "proxy-connect", world.AllowedV4.String(), fmt.Sprint(ok))...)
			if !r.OK || r.Reply != world.Greeting {
				t.Errorf("the rule's port through the proxy: %s", r)
			}
			if !w.WaitArrival(world.All(world.Since(start), world.ToPort(world.AllowedV4, ok)), 2*time.Second) {
				t.Error("the world recorded nothing on the rule's port")
			}
		})
	}
}
