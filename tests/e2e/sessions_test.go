// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// TestOutsideSession: while a session that denies DeniedV4 is running, a
// process outside it, as the same user, reaches DeniedV4 (so the world is
// reachable and sluice confines the session, not the machine); a probe
// inside the session is still refused right after.
func TestOutsideSession(t *testing.T) {
	w := newWorld(t)
	outsidePort := w.ListenTCP(t, world.DeniedV4)
	insidePort := w.ListenTCP(t, world.DeniedV4)
	dir := sharedDir(t)
	ready, stop := filepath.Join(dir, "ready"), filepath.Join(dir, "stop")
	script := fmt.Sprintf("touch %s; i=0; while [ ! -e %s ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; %s",
		shq(ready), shq(stop), probeLine(t, "tcp", world.DeniedV4.String(), port(insidePort)))
	_, wait := startSluice(t, w, runTimeout, runArgs(defaultPolicy, nil, "sh", "-c", script)...)
	waitFile(t, ready)
	if len(sessionDirs(t)) != 1 {
		t.Fatalf("want one running session, have %v", sessionDirs(t))
	}

	start := time.Now()
	r := w.RunProbe(t, nobody, "tcp", world.DeniedV4.String(), port(outsidePort))
	wantOK(t, r)
	if r.Reply != world.Greeting {
		t.Errorf("outside process got %q, want the greeting", r.Reply)
	}
	wantArrival(t, w, world.All(arrived(start, world.DeniedV4, outsidePort), world.From(world.ClientV4)), "the outside process's connect")

	start = time.Now()
	touch(t, stop)
	run := wait()
	inside, err := world.ParseProbeResult([]byte(run.Stdout))
	if err != nil {
		t.Fatalf("confined probe: %v\n%v", err, run)
	}
	wantDenied(t, inside, "connect")
	w.AssertNothingArrived(t, arrived(start, world.DeniedV4, insidePort), settle)
}

// TestTwoSessions: two sessions at once with opposite allowlists each get
// exactly their own policy and their own denial lines.
func TestTwoSessions(t *testing.T) {
	w := newWorld(t)
	portA := w.ListenTCP(t, world.AllowedV4)
	portD := w.ListenTCP(t, world.DeniedV4)
	dir := sharedDir(t)
	goFile := filepath.Join(dir, "go")
	start := time.Now()
	type session struct {
		name  string
		allow []string
		ready string
		wait  func() runResult
	}
	sessions := []*session{
		{name: "A", allow: []string{world.AllowedV4.String()}},
		{name: "B", allow: []string{world.DeniedV4.String()}},
	}
	for _, s := range sessions {
		s.ready = filepath.Join(dir, "ready-"+s.name)
		script := fmt.Sprintf("touch %s; i=0; while [ ! -e %s ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; %s; %s",
			shq(s.ready), shq(goFile),
			probeLine(t, "tcp", world.AllowedV4.String(), port(portA)),
			probeLine(t, "tcp", world.DeniedV4.String(), port(portD)))
		_, s.wait = startSluice(t, w, runTimeout, runArgs(s.allow, nil, "sh", "-c", script)...)
	}
	for _, s := range sessions {
		waitFile(t, s.ready)
	}
	if n := len(sessionDirs(t)); n != 2 {
		t.Errorf("want two session cgroups, have %d", n)
	}
	if run := runSluice(t, nil, "status"); run.Code != 0 || !strings.Contains(run.Stdout, "sessions: 2") {
		t.Errorf("sluice status with two sessions running:\n%v", run)
	}
	touch(t, goFile)

	for _, s := range sessions {
		run := s.wait()
		rs := probeLines(t, run.Stdout)
		if len(rs) != 2 {
			t.Fatalf("session %s: want 2 probe results\n%v", s.name, run)
		}
		var allowedHost, deniedHost string
		var deniedPort uint16
		if s.name == "A" {
			wantOK(t, rs[0])
			wantDenied(t, rs[1], "connect")
			allowedHost, deniedHost, deniedPort = world.AllowedV4.String(), world.DeniedV4.String(), portD
		} else {
			wantDenied(t, rs[0], "connect")
			wantOK(t, rs[1])
			allowedHost, deniedHost, deniedPort = world.DeniedV4.String(), world.AllowedV4.String(), portA
		}
		lines := denialLines(run.Stderr)
		if len(lines) != 1 {
			t.Errorf("session %s: want exactly one denial line, got %q", s.name, lines)
		}
		wantDenialLine(t, run.Stderr, "denied", deniedHost+":"+port(deniedPort)+"/tcp", "not in the allowlist")
		if strings.Contains(strings.Join(lines, "\n"), allowedHost+":") {
			t.Errorf("session %s: a denial line names its allowed host %s: %q", s.name, allowedHost, lines)
		}
		wantSummary(t, run.Stderr, 1, 1)
	}

	// Each host saw exactly one connection: A's to AllowedV4, B's to
	// DeniedV4.
	count := map[uint16]int{}
	for _, c := range w.Contacts() {
		if c.Time.After(start) {
			count[c.Local.Port()]++
		}
	}
	if count[portA] != 1 || count[portD] != 1 {
		t.Errorf("connections accepted: %d at AllowedV4 (want 1, session A), %d at DeniedV4 (want 1, session B)", count[portA], count[portD])
	}
}

// TestKilledSluiceFailsClosed: SIGKILL to `sluice run` leaves its command
// running and still confined (the pinned datapath keeps enforcing); another
// run meanwhile leaves the orphaned session alone; once the orphan's
// processes have exited, the next run reclaims its cgroup and map entries.
func TestKilledSluiceFailsClosed(t *testing.T) {
	w := newWorld(t)
	deniedPort := w.ListenTCP(t, world.DeniedV4)
	dir := sharedDir(t)
	ready, goFile, out := filepath.Join(dir, "ready"), filepath.Join(dir, "go"), filepath.Join(dir, "out.json")
	script := fmt.Sprintf("touch %s; while [ ! -e %s ]; do sleep 0.05; done; %s > %s",
		shq(ready), shq(goFile), probeLine(t, "tcp", world.DeniedV4.String(), port(deniedPort)), shq(out))
	proc, wait := startSluice(t, w, runTimeout, runArgs(defaultPolicy, nil, "sh", "-c", script)...)
	waitFile(t, ready)
	dirs := sessionDirs(t)
	if len(dirs) != 1 {
		t.Fatalf("want one running session, have %v", dirs)
	}
	orphan := dirs[0]
	t.Cleanup(func() {
		// However the test ends, the orphan must not linger.
		touch(t, goFile)
		if exists(orphan) {
			_ = os.WriteFile(filepath.Join(orphan, "cgroup.kill"), []byte("1"), 0)
		}
	})

	if err := proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if run := wait(); run.Code != 128+int(syscall.SIGKILL) {
		t.Fatalf("sluice was not killed by SIGKILL: %v", run)
	}
	if !populated(t, orphan) {
		t.Fatalf("killing sluice killed its command too; the test needs it alive")
	}

	// A run while the orphan is alive must not reclaim it.
	if run := runSluice(t, nil, runArgs(nil, nil, "true")...); run.Code != 0 {
		t.Errorf("sluice run -- true next to an orphaned session: %v", run)
	}
	if !exists(orphan) {
		t.Fatalf("a later run removed the orphaned session %s while its processes were alive", orphan)
	}

	start := time.Now()
	touch(t, goFile)
	r := readProbeFile(t, out)
	wantDenied(t, r, "connect")
	w.AssertNothingArrived(t, arrived(start, world.DeniedV4, 0), settle)

	if !waitFor(func() bool { return !populated(t, orphan) }) {
		t.Fatalf("the orphaned session %s still has processes after %v", orphan, waitBound)
	}
	if run := runSluice(t, nil, runArgs(nil, nil, "true")...); run.Code != 0 {
		t.Errorf("sluice run -- true after the orphan exited: %v", run)
	}
	if exists(orphan) {
		t.Errorf("the orphaned session's cgroup %s was not reclaimed by the next run", orphan)
	}
	assertQuiescent(t)
}

// populated reports whether the cgroup at dir has live processes (false
// once it is gone).
func populated(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false
	}
	return strings.Contains(string(b), "populated 1")
}
