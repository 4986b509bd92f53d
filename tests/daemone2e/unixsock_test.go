// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

var nobody = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}

// TestUnixSocketsThroughDaemon: through the daemon, a root relay outside
// the session (pathname and abstract) is refused with the explained line on
// the client's terminal and an audit line, and the world records nothing;
// the daemon's API socket stays reachable; once the machine allowlist
// lists the relay, sessions reach it, and a session may not list what the
// machine does not. The unconfined twin reaches the world through it.
func TestUnixSocketsThroughDaemon(t *testing.T) {
	requireUnixHooks(t)
	f := newFixture(t, "203.0.113.10")
	target := netip.AddrPortFrom(world.DeniedV4, f.denied)
	path := f.w.Relay(t, "unix", filepath.Join(f.dir, "relay.sock"), target)
	abstract := f.w.Relay(t, "unix", fmt.Sprintf("@sluice-d2e-relay-%d", time.Now().UnixNano()), target)

	for _, name := range []string{path, abstract} {
		start := time.Now()
		if r := f.w.RunProbe(t, nobody, "unix", name); !r.OK || r.Reply != world.Greeting {
			t.Fatalf("unconfined twin through %s: %s", name, r)
		}
		if !f.w.WaitArrival(world.All(world.Since(start), world.ToPort(world.DeniedV4, f.denied)), 2*time.Second) {
			t.Fatalf("the unconfined relay %s reached nothing", name)
		}
		f.w.WaitQuiet(world.ToPort(world.DeniedV4, f.denied), 300*time.Millisecond, 3*time.Second)

		start = time.Now()
		out, stderr, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", world.BuildProbe(t), "unix", name)
		r, _ := world.ParseProbeResult([]byte(out))
		if r.OK || r.Errno != "EPERM" || r.Stage != "connect" || code != 1 {
			t.Fatalf("relay %s through the daemon: %s (exit %d)", name, r, code)
		}
		if !strings.Contains(stderr, "sluice: denied probe[") || !strings.Contains(stderr, "-> unix:"+name+": not in the allowlist") {
			t.Errorf("the denial line did not reach the client:\n%s", stderr)
		}
		f.w.AssertNothingArrived(t, world.All(world.Since(start), world.ToPort(world.DeniedV4, f.denied)), 300*time.Millisecond)
		f.waitAudit(t, "egress_denied", func(e map[string]any) bool {
			return e["dst"] == "unix:"+name && e["proto"] == "unix" && e["comm"] == "probe"
		})
	}

	// The API socket: connect succeeds (the daemon then waits for a
	// request, so the probe gives up reading).
	if r := f.probe(t, nil, "-timeout", "300ms", "unix", f.sock); r.Stage != "read" {
		t.Errorf("the API socket from inside a session: %s, want a connect that succeeds", r)
	}

	// A session may not list what the machine does not.
	file := filepath.Join(f.dir, "session.json")
	f.writeFile(t, file, []byte(`{"allowed_hosts": [], "unix_sockets": ["`+path+`"]}`))
	if _, stderr, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--allowlist", file, "--", "true"); code == 0 || !strings.Contains(stderr, "unix_sockets") {
		t.Errorf("a session listing a socket the machine does not: exit %d %s", code, stderr)
	}

	// Listed in the machine allowlist (picked up by the watcher): reached.
	b, _ := json.Marshal(map[string]any{"allowed_hosts": []string{"203.0.113.10"}, "unix_sockets": []string{path, abstract}})
	f.writeFile(t, f.allow, b)
	deadline := time.Now().Add(10 * time.Second)
	for _, name := range []string{path, abstract} {
		for {
			start := time.Now()
			r := f.probe(t, nil, "unix", name)
			if r.OK {
				if !f.w.WaitArrival(world.All(world.Since(start), world.ToPort(world.DeniedV4, f.denied)), 2*time.Second) {
					t.Errorf("listed relay %s: the world saw nothing", name)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("listed relay %s still refused after the reload: %s", name, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Now a session may list it too.
	if r := f.probe(t, []string{"--allowlist", file}, "unix", path); !r.OK {
		t.Errorf("a session listing a socket the machine lists: %s", r)
	}
}

// TestLoopbackSessionThroughDaemon: a session asking for "loopback":
// "session" through the daemon cannot reach an outside loopback relay,
// while its own listener and a listed port work; without it, the relay
// works (the twin).
func TestLoopbackSessionThroughDaemon(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	relay := netip.MustParseAddrPort(f.w.Relay(t, "tcp", "127.0.0.1:0", netip.AddrPortFrom(world.DeniedV4, f.denied)))
	listed := netip.MustParseAddrPort(f.w.Relay(t, "tcp", "127.0.0.1:0", netip.AddrPortFrom(world.AllowedV4, f.port)))

	start := time.Now()
	if r := f.probe(t, nil, "tcp", "127.0.0.1", fmt.Sprint(relay.Port())); !r.OK {
		t.Fatalf("default loopback mode through the daemon: %s", r)
	}
	if !f.w.WaitArrival(world.All(world.Since(start), world.ToPort(world.DeniedV4, f.denied)), 2*time.Second) {
		t.Fatal("the loopback relay reached nothing in the default mode")
	}
	f.w.WaitQuiet(world.ToPort(world.DeniedV4, f.denied), 300*time.Millisecond, 3*time.Second)

	file := filepath.Join(f.dir, "session.json")
	f.writeFile(t, file, []byte(fmt.Sprintf(`{"allowed_hosts": ["203.0.113.10"], "loopback": "session", "loopback_ports": [%d]}`, listed.Port())))
	start = time.Now()
	out, stderr, _ := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--allowlist", file, "--", world.BuildProbe(t), "tcp", "127.0.0.1", fmt.Sprint(relay.Port()))
	r, _ := world.ParseProbeResult([]byte(out))
	if r.OK || r.Errno != "EPERM" {
		t.Fatalf("outside loopback relay in session mode: %s", r)
	}
	if !strings.Contains(stderr, fmt.Sprintf("-> 127.0.0.1:%d/tcp: loopback \"session\"", relay.Port())) {
		t.Errorf("no explained line:\n%s", stderr)
	}
	f.w.AssertNothingArrived(t, world.All(world.Since(start), world.ToPort(world.DeniedV4, f.denied)), 300*time.Millisecond)
	if r := f.probe(t, []string{"--allowlist", file}, "tcp", "127.0.0.1", fmt.Sprint(listed.Port())); !r.OK {
		t.Errorf("listed loopback port in session mode: %s", r)
	}
	if r := f.probe(t, []string{"--allowlist", file}, "tcp-self"); !r.OK {
		t.Errorf("the session's own listener in session mode: %s", r)
	}
}

// requireUnixHooks skips (fails under SLUICE_REQUIRE_KERNEL) on a kernel
// without the cgroup connect_unix/sendmsg_unix hooks (before 6.7).
func requireUnixHooks(t *testing.T) {
	t.Helper()
	if err := loader.ProbeUnix(); err != nil {
		needs.Skip(t, "%v", err)
	}
}

// TestDaemonHoldsSocketNames: a daemon session holds $SSH_AUTH_SOCK (a
// built-in name, in a directory the session's user owns) to the agent it
// names, in the session's mount namespace built from the caller's: the
// session cannot replace it by a symlink to a root relay outside the
// session, nor rename the agent's directory away, the world records
// nothing, and the agent still answers. Unconfined, the same swap reaches
// the world (the twin).
func TestDaemonHoldsSocketNames(t *testing.T) {
	requireUnixHooks(t)
	f := newFixture(t, "203.0.113.10")
	target := netip.AddrPortFrom(world.DeniedV4, f.denied)
	relay := f.w.Relay(t, "unix", filepath.Join(f.dir, "relay.sock"), target)
	probe := world.BuildProbe(t)
	setup := func(t *testing.T) string { return agentSocket(t, f) }
	script := func(agent string) string {
		d := filepath.Dir(agent)
		return fmt.Sprintf(`rm -f %[1]s; ln -s %[2]s %[1]s; mv %[3]s %[3]s.old && mkdir %[3]s && ln -s %[2]s %[1]s; %[4]s unix %[1]s`, agent, relay, d, probe)
	}

	t.Run("unconfined", func(t *testing.T) {
		agent := setup(t)
		start := time.Now()
		cmd := exec.Command("sh", "-c", script(agent))
		cmd.SysProcAttr = nobody
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := f.w.StartInClient(cmd); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		reached := false
		for line := range strings.Lines(out.String()) {
			if r, err := world.ParseProbeResult([]byte(line)); err == nil && r.OK && r.Reply == world.Greeting {
				reached = true
			}
		}
		if !reached {
			t.Fatalf("unconfined, the swap did not reach the relay, so the test proves nothing: %s", out.String())
		}
		if !f.w.WaitArrival(world.All(world.Since(start), world.ToPort(world.DeniedV4, f.denied)), 2*time.Second) {
			t.Fatalf("the unconfined swap reached nothing")
		}
		f.w.WaitQuiet(world.ToPort(world.DeniedV4, f.denied), 300*time.Millisecond, 3*time.Second)
	})
	t.Run("session", func(t *testing.T) {
		agent := setup(t)
		t.Setenv("SSH_AUTH_SOCK", agent)
		start := time.Now()
		out, _, _ := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script(agent))
		r, err := world.ParseProbeResult([]byte(out))
		if err != nil || !r.OK || r.Reply != "agent\n" {
			t.Errorf("after the swaps the agent does not answer under its name: %s (%v)", out, err)
		}
		f.w.AssertNothingArrived(t, world.All(world.Since(start), world.ToPort(world.DeniedV4, f.denied)), 300*time.Millisecond)
	})
}
