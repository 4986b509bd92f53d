// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// fifoShell is a long-running root bash in the client namespace that runs
// the lines written to its FIFO, in itself (eval): what it connects to
// with /dev/tcp is its own connection, what it runs is its child. It
// stands for a CI runner's worker, started before sluice and the parent
// of every later step.
type fifoShell struct {
	t    *testing.T
	dir  string
	fifo *os.File
	cmd  *exec.Cmd
	n    int
}

func (f *fixture) startShell(t *testing.T, tag string) *fifoShell {
	t.Helper()
	dir := filepath.Join(f.dir, tag)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// Read and write ends both held, so the loop never sees EOF.
	script := `exec 3<>"$1"; while read -r line <&3; do eval "$line"; done`
	c := exec.Command("bash", "--noprofile", "--norc", "-c", script, "bash", path)
	c.Dir = "/"
	if err := f.w.StartInClient(c); err != nil {
		t.Fatal(err)
	}
	sh := &fifoShell{t: t, dir: dir, cmd: c}
	t.Cleanup(func() {
		_ = c.Process.Kill()
		_ = c.Wait()
		if sh.fifo != nil {
			sh.fifo.Close()
		}
	})
	fifo, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	sh.fifo = fifo
	return sh
}

func (sh *fifoShell) pid() int { return sh.cmd.Process.Pid }

// run has the shell run line (stdout and stderr to a file) and returns
// that output.
func (sh *fifoShell) run(line string) string {
	sh.t.Helper()
	sh.n++
	out := filepath.Join(sh.dir, fmt.Sprintf("out.%d", sh.n))
	if _, err := fmt.Fprintf(sh.fifo, "{ %s ; } >%s.tmp 2>&1; mv %s.tmp %s\n", line, out, out, out); err != nil {
		sh.t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(out); err == nil {
			sh.t.Logf("shell %d: %s\n%s", sh.pid(), line, b)
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	sh.t.Fatalf("the shell did not run %q within 60 s", line)
	return ""
}

// devTCP has the shell itself (no child) connect to addr:port; it says
// "ok" or the error.
func (sh *fifoShell) devTCP(addr string, port uint16) string {
	sh.t.Helper()
	return strings.TrimSpace(sh.run(fmt.Sprintf(`if : 4<>/dev/tcp/%s/%d; then echo ok; fi`, addr, port)))
}

// cgroupOf is the cgroup v2 path of pid.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	t.Fatalf("pid %d has no cgroup v2 line: %s", pid, b)
	return ""
}

// contactsSince counts the world's arrivals at port since t0.
func (f *fixture) contactsSince(t0 time.Time, port uint16) int {
	n := 0
	for _, c := range f.w.Contacts() {
		if c.Local.Port() == port && !c.Time.Before(t0) {
			n++
		}
	}
	return n
}

// TestAdoptRunningProcess: a process that runs unconfined (it reaches a
// denied host, the world records it) is adopted through `sluice adopt`;
// from then on its own new connections and its children's to the denied
// host fail with EPERM and the world records nothing, while the allowed
// host is reachable by name through the session's resolver; a nested
// `sluice run` from it is held to its session; bad requests are refused
// and change nothing; the session survives kill -9 of the daemon and is
// attached again by the next one; it ends when the process exits.
func TestAdoptRunningProcess(t *testing.T) {
	f := newFixture(t, "allowed.test")
	probe := world.BuildProbe(t)
	denied, allowed := world.DeniedV4.String(), world.AllowedV4.String()
	sh := f.startShell(t, "worker")
	outside := cgroupOf(t, sh.pid())

	// The unconfined twin: the same connection, before the adoption.
	t0 := time.Now()
	if got := sh.devTCP(denied, f.denied); got != "ok" {
		t.Fatalf("before the adoption the shell could not reach the denied host: %q", got)
	}
	if f.contactsSince(t0, f.denied) == 0 {
		t.Fatalf("the world recorded nothing from the unconfined shell")
	}
	// An established connection (fd 5) that must survive the adoption.
	if got := sh.run(fmt.Sprintf(`exec 5<>/dev/tcp/%s/%d && echo held`, allowed, f.port)); !strings.Contains(got, "held") {
		t.Fatalf("open a connection before the adoption: %q", got)
	}

	// Bad requests first: each is refused and changes nothing.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body string
		code int
		msg  string
	}{
		{`{"pid": 0}`, 400, "above 1"},
		{`{"pid": 1}`, 400, "above 1"},
		{`{"pid": -5}`, 400, "above 1"},
		{fmt.Sprintf(`{"pid": %d, "colour": "red"}`, sh.pid()), 400, "unknown field"},
		{fmt.Sprintf(`{"pid": %d, "name": "a\nb"}`, sh.pid()), 400, "not printable"},
		{fmt.Sprintf(`{"pid": %d}`, dead.Process.Pid), 404, "no such process"},
		{fmt.Sprintf(`{"pid": %d}`, f.daemon.Process.Pid), 400, "the sluice daemon itself"},
		{fmt.Sprintf(`{"pid": %d}`, os.Getpid()), 400, "ancestor of the sluice daemon"},
		{`{"pid": 2}`, 400, "kernel thread"}, // kthreadd
	} {
		code, body := f.api(t, "POST", "/v1/sessions/adopt", []byte(tc.body))
		if code != tc.code || !strings.Contains(body, tc.msg) {
			t.Errorf("adopt %s: %d %s, want %d and %q", tc.body, code, body, tc.code, tc.msg)
		}
	}
	// Not root: refused, and on record.
	if _, stderr, code := f.sluice(t, 65534, 65534, "adopt", "--pid", strconv.Itoa(sh.pid())); code == 0 || !strings.Contains(stderr, "only root") {
		t.Errorf("adopt as uid 65534: exit %d, %s; want a refusal saying only root may", code, stderr)
	}
	f.waitAudit(t, "session_refused", func(e map[string]any) bool {
		r, _ := e["reason"].(string)
		return e["actor_uid"] == float64(65534) && strings.Contains(r, "adopt")
	})
	if got := cgroupOf(t, sh.pid()); got != outside {
		t.Fatalf("a refused adoption moved the shell: %s -> %s", outside, got)
	}
	if out, _, _ := f.sluice(t, 0, 0, "sessions"); strings.Contains(out, "adopt-") {
		t.Fatalf("a refused adoption left a session:\n%s", out)
	}

	// The adoption.
	out, stderr, code := f.sluice(t, 0, 0, "adopt", "--pid", strconv.Itoa(sh.pid()), "--name", "job 1")
	name := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(name, "adopt-"+strconv.Itoa(sh.pid())+"-") {
		t.Fatalf("sluice adopt: exit %d, %q %s", code, out, stderr)
	}
	if got := cgroupOf(t, sh.pid()); filepath.Base(got) != name {
		t.Fatalf("the adopted shell is in %s, not in session %s", got, name)
	}
	e := f.waitAudit(t, "session_started", func(e map[string]any) bool { return e["session"] == name })
	if msg, _ := e["message"].(string); !strings.Contains(msg, fmt.Sprintf("adopted pid %d (bash)", sh.pid())) || !strings.Contains(msg, "job 1") ||
		e["pid"] != float64(sh.pid()) || e["uid"] != float64(0) {
		t.Errorf("session_started of the adoption: %v", e)
	}
	code, body := f.api(t, "POST", "/v1/sessions/adopt", []byte(fmt.Sprintf(`{"pid": %d}`, sh.pid())))
	if code != 409 || !strings.Contains(body, "already in sluice session "+name) {
		t.Errorf("adopting the adopted shell again: %d %s, want 409 naming %s", code, body, name)
	}

	confined := func(when string) {
		t.Helper()
		t0 := time.Now()
		// The shell's own new connection.
		if got := sh.devTCP(denied, f.denied); !strings.Contains(got, "Operation not permitted") {
			t.Errorf("%s: the shell's own connection to the denied host: %q, want EPERM", when, got)
		}
		// A child it starts now.
		r, err := world.ParseProbeResult([]byte(sh.run(fmt.Sprintf("%s tcp %s %d", probe, denied, f.denied))))
		if err != nil || r.OK || r.Errno != "EPERM" {
			t.Errorf("%s: a child's connection to the denied host: %v %v, want EPERM", when, r, err)
		}
		// The allowed host, by name, through the session's resolver.
		r, err = world.ParseProbeResult([]byte(sh.run(fmt.Sprintf("%s resolve-tcp allowed.test %d", probe, f.port))))
		if err != nil || !r.OK {
			t.Errorf("%s: a child's connection to allowed.test: %v %v, want it to work", when, r, err)
		}
		f.w.AssertNothingArrived(t, world.All(world.To(world.DeniedV4), world.Since(t0)), 200*time.Millisecond)
		if n := f.contactsSince(t0, f.denied); n != 0 {
			t.Errorf("%s: the denied host recorded %d connections from the adopted shell", when, n)
		}
	}
	confined("adopted")
	if !f.dns.Saw("allowed.test") {
		t.Errorf("allowed.test was never asked upstream: the session's resolver did not answer it")
	}
	// The connection made before the adoption continues: the world's
	// server greets it on its socket, which keeps its old cgroup.
	if got := sh.run(`read -r -t 5 line <&5 && echo "got $line"`); !strings.Contains(got, "got hello") {
		t.Errorf("the connection established before the adoption: %q, want the greeting", got)
	}

	// A nested sluice run is a confined caller: asking for the denied
	// host is refused (beyond the machine allowlist, which is also the
	// adopted session's policy), asking for nothing gets the session's
	// policy, and audit mode is refused to a caller in an enforcing
	// session (which an unconfined root caller would get).
	nested := fmt.Sprintf("%s --socket %s run --user 65534:65534", sluiceBin, f.sock)
	t1 := time.Now()
	if got := sh.run(fmt.Sprintf("%s --allow denied.test --allow %s -- %s tcp %s %d", nested, denied, probe, denied, f.denied)); !strings.Contains(got, "403") && !strings.Contains(got, "narrow") {
		t.Errorf("nested sluice run --allow denied.test: %q, want a refusal", got)
	}
	r, err := world.ParseProbeResult([]byte(sh.run(fmt.Sprintf("%s -- %s tcp %s %d 2>/dev/null", nested, probe, denied, f.denied))))
	if err != nil || r.OK || r.Errno != "EPERM" {
		t.Errorf("nested sluice run to the denied host: %v %v, want EPERM", r, err)
	}
	if got := sh.run(fmt.Sprintf("%s --audit -- %s tcp %s %d", nested, probe, denied, f.denied)); !strings.Contains(got, "may not start an audit-mode session") {
		t.Errorf("nested audit-mode sluice run from the enforcing adopted session: %q, want a refusal", got)
	}
	f.w.AssertNothingArrived(t, world.All(world.To(world.DeniedV4), world.Since(t1)), 200*time.Millisecond)
	// A nested session's parent is the adopted one (so it is held to
	// the adopted session's policy, which here is the machine's), and a
	// process in it is not adopted again elsewhere.
	sh.run(fmt.Sprintf("%s -- /bin/sh -c 'echo $$ > %s/nested.pid; exec sleep 60' >/dev/null 2>&1 & true", nested, f.dir))
	nestedPID := strings.TrimSpace(string(waitFile(t, f.dir+"/nested.pid")))
	var list []struct {
		Name   string `json:"name"`
		Parent string `json:"parent"`
	}
	if code, body := f.api(t, "GET", "/v1/sessions", nil); code != 200 || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("list sessions: %d %s", code, body)
	}
	child := ""
	for _, s := range list {
		if s.Parent == name {
			child = s.Name
		}
	}
	if child == "" {
		t.Errorf("no session has the adopted session %s as its parent: %v", name, list)
	} else {
		code, body := f.api(t, "POST", "/v1/sessions/adopt", []byte(`{"pid": `+nestedPID+`}`))
		if code != 409 || !strings.Contains(body, "already in sluice session "+child) {
			t.Errorf("adopting a process of session %s: %d %s, want 409 naming it", child, code, body)
		}
		if code, body := f.api(t, "DELETE", "/v1/sessions/"+child, nil); code != 200 {
			t.Errorf("kill the nested session: %d %s", code, body)
		}
	}
	// Root inside the session may not adopt.
	if got := sh.run(fmt.Sprintf("%s --socket %s adopt --pid %d", sluiceBin, f.sock, os.Getpid())); !strings.Contains(got, "inside a sluice session") {
		t.Errorf("adopt from inside the adopted session: %q, want a refusal", got)
	}

	// kill -9 of the daemon: still confined (pinned); the next daemon
	// attaches the session again, resolver included.
	f.stopDaemon(t)
	t2 := time.Now()
	r, _ = world.ParseProbeResult([]byte(sh.run(fmt.Sprintf("%s tcp %s %d", probe, denied, f.denied))))
	if r.OK {
		t.Errorf("with no daemon the adopted shell's child reached the denied host")
	}
	f.w.AssertNothingArrived(t, world.All(world.To(world.DeniedV4), world.Since(t2)), 200*time.Millisecond)
	f.startDaemon(t)
	f.waitAudit(t, "session_adopted", func(e map[string]any) bool { return e["session"] == name })
	confined("after the daemon restart")
	var info struct {
		Name string `json:"name"`
		PID  int    `json:"pid"`
	}
	if code, body := f.api(t, "GET", "/v1/sessions/"+name, nil); code != 200 || json.Unmarshal([]byte(body), &info) != nil || info.PID != sh.pid() {
		t.Errorf("the re-attached session: %d %s, want it with pid %d", code, body, sh.pid())
	}

	// The process exits: the session ends, its cgroup and record go.
	_, _ = fmt.Fprintf(sh.fifo, "exit\n")
	_ = sh.cmd.Wait()
	f.waitAudit(t, "session_ended", func(e map[string]any) bool { return e["session"] == name })
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, errRec := os.Stat(filepath.Join("/run", f.instance, "daemon", name+".adopted"))
		if code, _ := f.api(t, "GET", "/v1/sessions/"+name, nil); code == 404 && os.IsNotExist(errRec) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s still known, or its record still there, 10 s after its process exited", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.auditEvents(t) // every line validates
}

// TestAdoptAuditMode: an adoption with --audit denies nothing and reports
// what it would have denied (the positive twin of the test above: the
// same adoption path, the connection reaches the world).
func TestAdoptAuditMode(t *testing.T) {
	f := newFixture(t, "allowed.test")
	sh := f.startShell(t, "auditworker")
	out, stderr, code := f.sluice(t, 0, 0, "adopt", "--pid", strconv.Itoa(sh.pid()), "--audit")
	name := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(name, "adopt-") {
		t.Fatalf("sluice adopt --audit: exit %d, %q %s", code, out, stderr)
	}
	t0 := time.Now()
	if got := sh.devTCP(world.DeniedV4.String(), f.denied); got != "ok" {
		t.Errorf("an audit-mode adopted shell could not reach the denied host: %q", got)
	}
	if f.contactsSince(t0, f.denied) == 0 {
		t.Errorf("the world recorded nothing from the audit-mode adopted shell")
	}
	f.waitAudit(t, "egress_would_deny", func(e map[string]any) bool {
		return e["session"] == name && e["dst"] == world.DeniedV4.String()
	})
}
