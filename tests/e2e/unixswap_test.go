// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// Issue 9, unix socket names: the datapath allows $SSH_AUTH_SOCK by name,
// and the kernel follows the name afterwards. A session that can write
// the agent's directory must not make the name lead to a root relay
// outside the session (which dials the world for whoever connects, like
// docker.sock): not by a symlink at the name, not by renaming another
// socket over it, not by renaming the agent's directory away, and not by
// bind-mounting the relay over it from a user namespace of its own.
// Each attack runs unconfined first (the twin that shows it reaches the
// world on this machine), then in a session, where it must fail, the
// world must record nothing, and the real agent must still answer.

// swapSetup is one attack's fresh stage: the user's agent directory and
// socket, the root relay, and a directory the user may write that holds a
// second root relay (for renames).
type swapSetup struct {
	agent, relay, movable string
}

func newSwapSetup(t *testing.T, w *world.World, target netip.AddrPort) swapSetup {
	t.Helper()
	base := sharedDir(t)
	dir := filepath.Join(base, "ssh-agentdir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(dir, "agent.42")
	var ln net.Listener
	if err := w.InClient(func() (err error) { ln, err = net.Listen("unix", agent); return err }); err != nil {
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
	rootDir := filepath.Join(base, "root")
	if err := os.Mkdir(rootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writable := filepath.Join(base, "writable")
	if err := os.Mkdir(writable, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(writable, 0o777); err != nil {
		t.Fatal(err)
	}
	return swapSetup{
		agent:   agent,
		relay:   w.Relay(t, "unix", filepath.Join(rootDir, "relay.sock"), target),
		movable: w.Relay(t, "unix", filepath.Join(writable, "relay.sock"), target),
	}
}

func TestUnixSocketNameSwaps(t *testing.T) {
	w := newWorld(t)
	requireUnixHooks(t)
	p := w.ListenTCP(t, world.DeniedV4)
	target := netip.AddrPortFrom(world.DeniedV4, p)
	attacks := []struct {
		name   string
		script func(s swapSetup) string
	}{
		{"symlink", func(s swapSetup) string {
			return `rm -f "$SSH_AUTH_SOCK"; ln -s ` + shq(s.relay) + ` "$SSH_AUTH_SOCK"; `
		}},
		{"rename-over", func(s swapSetup) string {
			return `mv -f ` + shq(s.movable) + ` "$SSH_AUTH_SOCK"; `
		}},
		{"rename-dir", func(s swapSetup) string {
			d := filepath.Dir(s.agent)
			return `mv ` + shq(d) + ` ` + shq(d+".old") + ` && mkdir ` + shq(d) + ` && ln -s ` + shq(s.relay) + ` "$SSH_AUTH_SOCK"; `
		}},
		{"userns-bind", func(s swapSetup) string {
			return `unshare -rm --propagation unchanged sh -c 'mount --bind ` + s.relay + ` "$SSH_AUTH_SOCK" && ` + probeLine(t, "unix", s.agent) + `'; `
		}},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			// The twin: unconfined, the same user reaches the world.
			s := newSwapSetup(t, w, target)
			script := a.script(s) + probeLine(t, "unix", s.agent)
			start := time.Now()
			out := runAsNobody(t, w, s.agent, script)
			if !reachedRelay(probeLines(t, out)) {
				t.Fatalf("unconfined, the %s attack did not reach the relay, so the test proves nothing: %s", a.name, out)
			}
			wantArrival(t, w, arrived(start, world.DeniedV4, p), "the unconfined attack")
			w.WaitQuiet(world.ToPort(world.DeniedV4, p), 300*time.Millisecond, 3*time.Second)

			for _, flags := range [][]string{nil, {"--share-processes"}} {
				s := newSwapSetup(t, w, target)
				script := a.script(s) + probeLine(t, "unix", s.agent)
				start := time.Now()
				run := runSwap(t, w, s.agent, flags, script)
				rs := probeLines(t, run.Stdout)
				for _, r := range rs {
					if r.Reply == world.Greeting {
						t.Errorf("%v: the %s attack reached the relay: %v", flags, a.name, run)
					}
				}
				w.AssertNothingArrived(t, arrived(start, world.DeniedV4, p), settle)
				// The real agent still answers under its name.
				last := rs[len(rs)-1]
				if !last.OK || last.Reply != "agent\n" {
					t.Errorf("%v: after the %s attack the agent does not answer: %v", flags, a.name, run)
				}
			}
		})
	}
	// A built-in name that does not exist when the session starts cannot
	// be held: the session could create it as a symlink to the relay, so
	// it is not allowed at all.
	t.Run("created-later", func(t *testing.T) {
		s := newSwapSetup(t, w, target)
		missing := filepath.Join(filepath.Dir(s.agent), "agent.later")
		script := `ln -s ` + shq(s.relay) + ` ` + shq(missing) + `; ` + probeLine(t, "unix", missing)
		start := time.Now()
		if out := runAsNobody(t, w, missing, script); !reachedRelay(probeLines(t, out)) {
			t.Fatalf("unconfined, the link did not lead to the relay, so the test proves nothing: %s", out)
		}
		wantArrival(t, w, arrived(start, world.DeniedV4, p), "the unconfined link")
		w.WaitQuiet(world.ToPort(world.DeniedV4, p), 300*time.Millisecond, 3*time.Second)
		s = newSwapSetup(t, w, target)
		missing = filepath.Join(filepath.Dir(s.agent), "agent.later")
		script = `ln -s ` + shq(s.relay) + ` ` + shq(missing) + `; ` + probeLine(t, "unix", missing)
		start = time.Now()
		run := runSwap(t, w, missing, nil, script)
		rs := probeLines(t, run.Stdout)
		if len(rs) != 1 {
			t.Fatalf("want one probe line: %v", run)
		}
		wantDenied(t, rs[0], "connect")
		wantDenialLine(t, run.Stderr, "denied", "unix:"+missing, unixReason)
		w.AssertNothingArrived(t, arrived(start, world.DeniedV4, p), settle)
	})

	// The opt-in twin: --allow-userns in a session without process
	// isolation lets the bind mount through, and the world sees it.
	t.Run("userns-bind-allowed", func(t *testing.T) {
		s := newSwapSetup(t, w, target)
		script := attacks[3].script(s)
		start := time.Now()
		run := runSwap(t, w, s.agent, []string{"--share-processes", "--allow-userns"}, script)
		if !reachedRelay(probeLines(t, run.Stdout)) {
			t.Fatalf("with --allow-userns the bind mount did not lead to the relay: %v", run)
		}
		wantArrival(t, w, arrived(start, world.DeniedV4, p), "the relay reached under the agent's name")
	})
}

// reachedRelay reports whether a probe got the world's greeting through
// the relay.
func reachedRelay(rs []world.ProbeResult) bool {
	for _, r := range rs {
		if r.OK && r.Reply == world.Greeting {
			return true
		}
	}
	return false
}

// runSwap runs script in a session with $SSH_AUTH_SOCK set to agent.
func runSwap(t *testing.T, w *world.World, agent string, flags []string, script string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := sluiceCmd(ctx, w, runArgs(defaultPolicy, flags, "sh", "-c", script)...)
	cmd.Env = append(cmd.Env, "SSH_AUTH_SOCK="+agent)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		t.Fatalf("sluice %v: %v", flags, err)
	}
	r := runResult{Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()}
	t.Logf("sluice %v\n%v", flags, r)
	return r
}

// runAsNobody runs script unconfined as uid 65534 in the client namespace
// with $SSH_AUTH_SOCK set to agent, and returns its output.
func runAsNobody(t *testing.T, w *world.World, agent, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+agent)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody.Credential}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := w.StartInClient(cmd); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	t.Logf("unconfined: %s (%v)", out.String(), err)
	return out.String()
}
