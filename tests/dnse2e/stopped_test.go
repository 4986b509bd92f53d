// SPDX-License-Identifier: Apache-2.0

//go:build linux

package dnse2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// TestFailoverStoppedResolver: a resolver that holds its socket but no
// longer answers (its sluice stopped with SIGSTOP, as a debugger or a
// frozen cgroup would) costs the default path no lookup: its beat lapses
// and the session's queries take the kernel path, reaching the world's
// server. The twin is a session on the resolver path stopped the same
// way: its lookups time out and the world never sees them, so the stop
// really takes the resolver away.
func TestFailoverStoppedResolver(t *testing.T) {
	if p := os.Getenv("SLUICE_E2E_DNS_PATH"); p != "" && p != "auto" {
		t.Skipf("SLUICE_E2E_DNS_PATH=%s: the default path is tested without it", p)
	}
	f := newFixture(t)
	probe := world.BuildProbe(t)
	dir, err := os.MkdirTemp("", "sluice-stopped-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	// Fresh spellings of a name the world answers: the kernel path
	// forwards a name as the program spelled it, so each lookup is one
	// the world's log can tell apart.
	spell := func() string {
		b := []byte("a.wild.test")
		for i := range b {
			if b[i] != '.' && rand.IntN(2) == 0 {
				b[i] -= 'a' - 'A'
			}
		}
		return string(b)
	}
	type arm struct {
		path  string
		names []string
		cmd   *syscallCmd
	}
	arms := []*arm{{path: "auto"}, {path: "resolver"}}
	seen := map[string]bool{}
	for _, a := range arms {
		for len(a.names) < 5 {
			if n := spell(); !seen[n] && strings.ToLower(n) != n {
				seen[n] = true
				a.names = append(a.names, n)
			}
		}
		var lookups []string
		for _, n := range a.names {
			lookups = append(lookups, fmt.Sprintf("%s -timeout 1s dns %s 53 %s A udp", probe, authV4, n))
		}
		script := fmt.Sprintf("echo 1 > %[1]s/started-%[2]s; while [ ! -e %[1]s/go ]; do sleep 0.05; done; %[3]s; echo 1 > %[1]s/done-%[2]s",
			dir, a.path, strings.Join(lookups, "; "))
		a.cmd = startSluice(t, f, authV4, []string{"--dns-path", a.path, "--allow", "*.wild.test"}, "sh", "-c", script)
	}
	for _, a := range arms {
		waitPath(t, filepath.Join(dir, "started-"+a.path), 20*time.Second)
	}
	time.Sleep(time.Second) // a beat or two while running
	for _, a := range arms {
		a.cmd.signal(t, syscall.SIGSTOP)
	}
	cont := func() {
		for _, a := range arms {
			a.cmd.signal(t, syscall.SIGCONT)
		}
	}
	defer cont()
	time.Sleep(3 * time.Second) // past the beat's 2 s validity
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, a := range arms {
		waitPath(t, filepath.Join(dir, "done-"+a.path), 30*time.Second)
	}
	cont()
	for _, a := range arms {
		out := a.cmd.wait(t)
		rs := results(t, out)
		if len(rs) != len(a.names) {
			t.Fatalf("%s: want %d results, got %d:\n%s", a.path, len(a.names), len(rs), out)
		}
		for i, r := range rs {
			answered := r.Rcode == "NOERROR" && len(r.Answers) > 0
			reached := f.auth.SawExactly(a.names[i] + ".")
			switch a.path {
			case "auto":
				if !answered || !reached {
					t.Errorf("auto, resolver stopped: lookup of %s: %s (the world saw it: %v): the failover did not take it", a.names[i], r, reached)
				}
			default:
				if answered || reached {
					t.Errorf("twin (resolver path, resolver stopped): lookup of %s: %s (the world saw it: %v): the stop proves nothing", a.names[i], r, reached)
				}
			}
		}
	}
}

// syscallCmd is a `sluice run` started in the client namespace whose
// process the test signals.
type syscallCmd struct {
	c      *exec.Cmd
	out    *bytes.Buffer
	errb   *bytes.Buffer
	cancel context.CancelFunc
}

// startSluice starts `sluice run` with flags and command, as run does
// but with the upstream given, without waiting for it.
func startSluice(t *testing.T, f *fixture, upstream netip.Addr, flags []string, command ...string) *syscallCmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	args := append([]string{"run", "--user", "65534:65534", "--dns-upstream", upstream.String()}, flags...)
	args = append(args, "--")
	args = append(args, command...)
	c := f.w.ClientCmd(ctx, sluiceBin, args...)
	c.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance)
	s := &syscallCmd{c: c, out: &bytes.Buffer{}, errb: &bytes.Buffer{}, cancel: cancel}
	c.Stdout, c.Stderr = s.out, s.errb
	if err := c.Start(); err != nil {
		cancel()
		t.Fatalf("start sluice run: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Process.Signal(syscall.SIGCONT)
		cancel()
		_ = c.Wait()
	})
	return s
}

func (s *syscallCmd) signal(t *testing.T, sig syscall.Signal) {
	if err := s.c.Process.Signal(sig); err != nil {
		t.Logf("signal %v: %v", sig, err)
	}
}

// wait waits for the run to end and returns its stdout.
func (s *syscallCmd) wait(t *testing.T) string {
	t.Helper()
	err := s.c.Wait()
	t.Logf("sluice run (%v): %v\nstdout: %s\nstderr: %s", s.c.Args, err, s.out, s.errb)
	return s.out.String()
}

// waitPath waits, bounded, for path to exist.
func waitPath(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("no %s after %s", path, timeout)
}
