// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

// TestDaemonize: a double-forked, setsid'd grandchild that runs after its
// parent and the session's main process have gone is still confined, and
// sluice's denial line names the grandchild.
func TestDaemonize(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		name    string
		host    netip.Addr
		allowed bool
	}{
		{"denied", world.DeniedV4, false},
		{"allowed", world.AllowedV4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := w.ListenTCP(t, tc.host)
			out := filepath.Join(sharedDir(t), "result.json")
			// The shell (the session's main process) waits, bounded, for
			// the grandchild's result, so that sluice is still reading
			// events when it connects.
			script := fmt.Sprintf("%s; i=0; while [ ! -s %s ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done",
				probeLine(t, "daemonize", out, "tcp", tc.host.String(), port(p)), shq(out))
			start := time.Now()
			run := shellCommand(t, w, defaultPolicy, nil, script)
			lines := probeLines(t, run.Stdout)
			if len(lines) != 1 || !lines[0].OK || lines[0].PID == 0 {
				t.Fatalf("daemonize did not start its grandchild: %v", run)
			}
			got := readProbeFile(t, out)
			if got.Op != "tcp" {
				t.Fatalf("grandchild result %v", got)
			}
			if tc.allowed {
				wantOK(t, got)
				wantArrival(t, w, arrived(start, tc.host, p), "the allowed grandchild's connect")
				return
			}
			wantDenied(t, got, "connect")
			if pid := wantDenialLineOf(t, run.Stderr, "denied", "", dest(tc.host, p, "tcp"), "not in the allowlist"); pid != 0 && pid != lines[0].PID {
				t.Errorf("denial line names pid %d, want the grandchild %d", pid, lines[0].PID)
			}
			w.AssertNothingArrived(t, arrived(start, tc.host, 0), settle)
		})
	}
}

// TestEscapeCgroup: the agent writes its pid into cgroup.procs of every
// cgroup above its session; every move fails, it stays in its session and
// its connect is still judged by the session's policy.
func TestEscapeCgroup(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		name    string
		host    netip.Addr
		allowed bool
	}{
		{"denied", world.DeniedV4, false},
		{"allowed", world.AllowedV4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := w.ListenTCP(t, tc.host)
			start := time.Now()
			r, run := confinedProbe(t, w, defaultPolicy, nil, "escape-cgroup", "tcp", tc.host.String(), port(p))
			wantStayed(t, r)
			if r.Action == nil {
				t.Fatalf("escape-cgroup ran no action: %v", r)
			}
			if tc.allowed {
				wantOK(t, *r.Action)
				wantArrival(t, w, arrived(start, tc.host, p), "the allowed connect after the escape attempts")
				return
			}
			wantDenied(t, *r.Action, "connect")
			wantDenialLine(t, run.Stderr, "denied", dest(tc.host, p, "tcp"), "not in the allowlist")
			w.AssertNothingArrived(t, arrived(start, tc.host, 0), settle)
		})
	}
}

// wantStayed checks an escape-cgroup result: attempts were made on every
// ancestor up to the mount's root, all failed, and the probe stayed in its
// session cgroup.
func wantStayed(t *testing.T, r world.ProbeResult) {
	t.Helper()
	prefix := "/" + instance + "/"
	if !strings.HasPrefix(r.CgroupFrom, prefix) || r.CgroupTo != r.CgroupFrom {
		t.Errorf("cgroup went from %q to %q; want a session under %s throughout", r.CgroupFrom, r.CgroupTo, prefix)
	}
	want := []string{filepath.Join(cgRoot(), "cgroup.procs"), filepath.Join(cgMount, "cgroup.procs")}
	var tried []string
	for _, m := range r.Escapes {
		tried = append(tried, m.Path)
		if m.OK || m.Errno == "" {
			t.Errorf("moving into %s: ok=%v errno=%q, want a refusal", m.Path, m.OK, m.Errno)
		}
	}
	for _, p := range want {
		if !strings.Contains(strings.Join(tried, "\n"), p) {
			t.Errorf("no attempt to write %s; attempts: %q", p, tried)
		}
	}
}

// TestUnshare: a fresh user namespace (root inside it, full capabilities
// over its own namespaces) does not help the agent out of its session.
func TestUnshare(t *testing.T) {
	w := newWorld(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		needs.Skip(t, "unshare(1) not installed (apt-get install util-linux)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	probe := exec.CommandContext(ctx, unshare, "-r", "true")
	probe.SysProcAttr = nobody
	if out, err := probe.CombinedOutput(); err != nil {
		needs.Absent(t, "unprivileged user namespaces are unavailable here: %v: %s", err, out)
	}
	deniedPort := w.ListenTCP(t, world.DeniedV4)
	allowedPort := w.ListenTCP(t, world.AllowedV4)

	// unshare -rn: a new network namespace too. Whatever the errno,
	// nothing may reach the world.
	t.Run("rn", func(t *testing.T) {
		start := time.Now()
		run := runSluice(t, w, runArgs(defaultPolicy, nil, append([]string{unshare, "-rn", probeBin(t)}, "tcp", world.DeniedV4.String(), port(deniedPort))...)...)
		r, err := world.ParseProbeResult([]byte(run.Stdout))
		if err != nil {
			t.Fatalf("unshare -rn probe: %v\n%v", err, run)
		}
		if r.OK {
			t.Errorf("connect from a fresh network namespace succeeded: %v", r)
		}
		w.AssertNothingArrived(t, arrived(start, world.DeniedV4, 0), settle)
	})

	// unshare -r: same network namespace, root in a user namespace:
	// still EPERM, and the allowed host still works.
	t.Run("r", func(t *testing.T) {
		start := time.Now()
		run := runSluice(t, w, runArgs(defaultPolicy, nil, unshare, "-r", probeBin(t), "tcp", world.DeniedV4.String(), port(deniedPort))...)
		r, err := world.ParseProbeResult([]byte(run.Stdout))
		if err != nil {
			t.Fatalf("unshare -r probe: %v\n%v", err, run)
		}
		wantDenied(t, r, "connect")
		wantDenialLine(t, run.Stderr, "denied", dest(world.DeniedV4, deniedPort, "tcp"), "not in the allowlist")
		w.AssertNothingArrived(t, arrived(start, world.DeniedV4, 0), settle)

		start = time.Now()
		run = runSluice(t, w, runArgs(defaultPolicy, nil, unshare, "-r", probeBin(t), "tcp", world.AllowedV4.String(), port(allowedPort))...)
		if r, err = world.ParseProbeResult([]byte(run.Stdout)); err != nil {
			t.Fatalf("unshare -r probe: %v\n%v", err, run)
		}
		wantOK(t, r)
		wantArrival(t, w, arrived(start, world.AllowedV4, allowedPort), "the allowed connect from a user namespace")
	})

	// unshare -r, then try every cgroup.procs above: root in a user
	// namespace owns no cgroup file.
	t.Run("r-escape-cgroup", func(t *testing.T) {
		start := time.Now()
		run := runSluice(t, w, runArgs(defaultPolicy, nil, unshare, "-r", probeBin(t), "escape-cgroup", "tcp", world.DeniedV4.String(), port(deniedPort))...)
		r, err := world.ParseProbeResult([]byte(run.Stdout))
		if err != nil {
			t.Fatalf("unshare -r probe escape-cgroup: %v\n%v", err, run)
		}
		wantStayed(t, r)
		if r.Action == nil {
			t.Fatalf("no action: %v", r)
		}
		wantDenied(t, *r.Action, "connect")
		w.AssertNothingArrived(t, arrived(start, world.DeniedV4, 0), settle)
	})
}
