// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// agentSocket starts a stand-in ssh agent owned by uid 65534 in a
// directory of its own below the fixture's: it answers "agent\n".
func agentSocket(t *testing.T, f *fixture) string {
	t.Helper()
	dir, err := os.MkdirTemp(f.dir, "ssh-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(dir, "agent.7")
	var ln net.Listener
	if err := f.w.InClient(func() (err error) { ln, err = net.Listen("unix", agent); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.Chown(agent, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("agent\n"))
			c.Close()
		}
	}()
	return agent
}

// TestNestedSessionSSHAuthSock: through the daemon, as a member of its
// group (uid 65534, not root), a session whose caller is itself in a
// session gets at most the $SSH_AUTH_SOCK its parent was given. A nested
// session that names a relay (standing in for docker.sock) as its
// SSH_AUTH_SOCK cannot reach it, and the world records nothing from it;
// a nested session that keeps its parent's SSH_AUTH_SOCK reaches the
// agent. Both hold again after a daemon restart (the parent re-adopted
// from its record). The unconfined twin: a top-level session given the
// relay as its SSH_AUTH_SOCK by an unconfined caller reaches it, and the
// world records the arrival.
func TestNestedSessionSSHAuthSock(t *testing.T) {
	requireUnixHooks(t)
	f := newFixture(t, "203.0.113.10")
	target := netip.AddrPortFrom(world.DeniedV4, f.denied)
	relay := f.w.Relay(t, "unix", filepath.Join(f.dir, "docker.sock"), target)
	agent := agentSocket(t, f)
	probe := world.BuildProbe(t)
	toRelay := world.ToPort(world.DeniedV4, f.denied)

	t.Run("unconfined-twin", func(t *testing.T) {
		t.Setenv("SSH_AUTH_SOCK", relay)
		start := time.Now()
		out, _, _ := f.sluice(t, 65534, 65534, "run", "--", probe, "unix", relay)
		if r, err := world.ParseProbeResult([]byte(out)); err != nil || !r.OK || r.Reply != world.Greeting {
			t.Fatalf("a top-level session given SSH_AUTH_SOCK=%s did not reach it, so the test proves nothing: %s (%v)", relay, out, err)
		}
		if !f.w.WaitArrival(world.All(world.Since(start), toRelay), 2*time.Second) {
			t.Fatal("the top-level session's relay reached nothing")
		}
		f.w.WaitQuiet(toRelay, 300*time.Millisecond, 3*time.Second)
	})

	// The parent: a session of uid 65534 whose SSH_AUTH_SOCK is the
	// agent; it runs two nested sessions per phase, told by files.
	d := f.dir
	script := filepath.Join(d, "parent.sh")
	f.writeFile(t, script, []byte(fmt.Sprintf(`waitfor() { i=0; while [ ! -e "$1" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; }
for phase in 1 2; do
  waitfor %[1]s/go$phase
  SSH_AUTH_SOCK=%[4]s %[2]s --socket %[3]s run -- %[5]s unix %[4]s > %[1]s/relay$phase.tmp 2> %[1]s/relay$phase.err
  mv %[1]s/relay$phase.tmp %[1]s/relay$phase
  %[2]s --socket %[3]s run -- %[5]s unix %[6]s > %[1]s/agent$phase.tmp 2> %[1]s/agent$phase.err
  mv %[1]s/agent$phase.tmp %[1]s/agent$phase
done
`, d, sluiceBin, f.sock, relay, probe, agent)))
	t.Setenv("SSH_AUTH_SOCK", agent)
	parent := make(chan struct{})
	go func() {
		defer close(parent)
		f.sluice(t, 65534, 65534, "run", "--", "sh", script)
	}()
	t.Cleanup(func() {
		for _, g := range []string{"go1", "go2"} {
			_ = os.WriteFile(filepath.Join(d, g), nil, 0o644)
		}
		<-parent
	})
	read := func(name string) string { b, _ := os.ReadFile(filepath.Join(d, name)); return string(b) }
	phase := func(t *testing.T, n int) {
		start := time.Now()
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("go%d", n)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		out := waitFile(t, filepath.Join(d, fmt.Sprintf("relay%d", n)))
		if r, err := world.ParseProbeResult(out); err != nil || r.OK || r.Errno != "EPERM" {
			t.Errorf("a nested session with SSH_AUTH_SOCK=%s (not its parent's) reached it: %s (%v)\nstderr: %s", relay, out, err, read(fmt.Sprintf("relay%d.err", n)))
		}
		if e := read(fmt.Sprintf("relay%d.err", n)); !strings.Contains(e, "is not reachable in this session: a session started from inside another one") {
			t.Errorf("the nested session was not told why its SSH_AUTH_SOCK is not reachable:\n%s", e)
		}
		f.w.AssertNothingArrived(t, world.All(world.Since(start), toRelay), 300*time.Millisecond)
		out = waitFile(t, filepath.Join(d, fmt.Sprintf("agent%d", n)))
		if r, err := world.ParseProbeResult(out); err != nil || !r.OK || r.Reply != "agent\n" {
			t.Errorf("a nested session that keeps its parent's SSH_AUTH_SOCK does not reach the agent: %s (%v)\nstderr: %s", out, err, read(fmt.Sprintf("agent%d.err", n)))
		}
	}
	t.Run("nested", func(t *testing.T) { phase(t, 1) })
	// The parent's record keeps what it was given: a new daemon adopts
	// it and bounds its nested sessions the same way.
	f.stopDaemon(t)
	f.startDaemon(t)
	f.waitAudit(t, "session_adopted", nil)
	t.Run("nested-after-restart", func(t *testing.T) { phase(t, 2) })
}
