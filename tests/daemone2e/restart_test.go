// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runResult is what a `sluice run` in the background came back with.
type runResult struct {
	stderr string
	code   int
}

// runInBackground starts `sluice run` of a script that marks started,
// waits for go, then exits 7.
func (f *fixture) runInBackground(t *testing.T, tag string, flags ...string) (client *exec.Cmd, goFile string, res chan runResult) {
	started, goFile := filepath.Join(f.dir, tag+".started"), filepath.Join(f.dir, tag+".go")
	script := fmt.Sprintf(`trap 'exit 42' USR1; touch %s; while [ ! -e %s ]; do sleep 0.05; done; exit 7`, started, goFile)
	res = make(chan runResult, 1)
	args := append(append([]string{"run", "--user", "65534:65534"}, flags...), "--", "sh", "-c", script)
	// stderr is a file, not a pipe: the command holds the client's
	// descriptors, and a pipe would keep Wait waiting for the command
	// rather than for sluice run.
	errFile, err := os.Create(filepath.Join(f.dir, tag+".stderr"))
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(sluiceBin, append([]string{"--socket", f.sock}, args...)...)
	c.Dir, c.Stdout, c.Stderr = "/", errFile, errFile
	if err := f.w.StartInClient(c); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer errFile.Close()
		err := c.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		b, _ := os.ReadFile(errFile.Name())
		t.Logf("sluice %s -> %d\nstderr: %s", strings.Join(args, " "), code, b)
		res <- runResult{string(b), code}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			return c, goFile, res
		}
		select {
		case r := <-res:
			t.Fatalf("sluice run ended before its command started (exit %d):\n%s", r.code, r.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", started)
		}
	}
}

func readFileString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func waitResult(t *testing.T, res chan runResult) runResult {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("sluice run did not return within 60 s")
		return runResult{}
	}
}

// A `sluice run` whose daemon is killed (-9) goes on waiting, reattaches
// to the next daemon, and returns its command's exit status, saying once
// that the daemon restarted: whether the command ends after the new
// daemon adopted it, or while no daemon ran at all.
func TestRunSurvivesDaemonRestart(t *testing.T) {
	f := newFixture(t)

	// The command ends under the new daemon.
	_, goFile, res := f.runInBackground(t, "a")
	f.stopDaemon(t) // kill -9
	select {
	case r := <-res:
		t.Fatalf("sluice run returned when its daemon died (exit %d):\n%s", r.code, r.stderr)
	case <-time.After(1500 * time.Millisecond):
	}
	f.startDaemon(t)
	touch(t, goFile)
	r := waitResult(t, res)
	if r.code != 7 {
		t.Errorf("exit status across the restart: %d, want the command's 7\n%s", r.code, r.stderr)
	}
	if n := strings.Count(r.stderr, "the daemon restarted"); n != 1 {
		t.Errorf("want one line saying the daemon restarted, got %d:\n%s", n, r.stderr)
	}
	if strings.Contains(r.stderr, "unexpected EOF") {
		t.Errorf("the lost stream leaked to the user:\n%s", r.stderr)
	}

	// A signal to sluice run reaches the command through the new daemon.
	client, _, res := f.runInBackground(t, "s")
	f.stopDaemon(t)
	f.startDaemon(t)
	f.waitAudit(t, "session_adopted", nil)
	// Once reattached (the line is on stderr), forward USR1.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(readFileString(filepath.Join(f.dir, "s.stderr")), "the daemon restarted") {
		if time.Now().After(deadline) {
			t.Fatal("sluice run did not reattach within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = client.Process.Signal(syscall.SIGUSR1)
	if r := waitResult(t, res); r.code != 42 {
		t.Errorf("USR1 after the restart: exit %d, want 42 from the command's trap\n%s", r.code, r.stderr)
	}

	// The command ends while no daemon runs: its supervisor keeps the
	// status for the next daemon.
	_, goFile, res = f.runInBackground(t, "b")
	f.stopDaemon(t)
	touch(t, goFile)
	if got := f.waitExitRecorded(t); got != "7" {
		t.Errorf("recorded with no daemon running: %q, want 7", got)
	}
	f.startDaemon(t)
	r = waitResult(t, res)
	if r.code != 7 {
		t.Errorf("exit status of a command that ended with no daemon: %d, want 7\n%s\naudit: %v", r.code, r.stderr, f.auditEvents(t))
	}
}

// With no daemon back within --reconnect-timeout, sluice run says so and
// exits non-zero; the session goes on, and the next daemon adopts it.
func TestRunGivesUpWhenNoDaemonComesBack(t *testing.T) {
	f := newFixture(t)
	_, goFile, res := f.runInBackground(t, "c", "--reconnect-timeout", "1s")
	f.stopDaemon(t)
	r := waitResult(t, res)
	if r.code != 125 || !strings.Contains(r.stderr, "none came back within 1s") || !strings.Contains(r.stderr, "still confined") {
		t.Errorf("no daemon back: exit %d, want 125 and an explanation:\n%s", r.code, r.stderr)
	}
	f.startDaemon(t)
	f.waitAudit(t, "session_adopted", nil)
	touch(t, goFile)
	e := f.waitAudit(t, "session_ended", nil)
	if e["exit"] != float64(7) {
		t.Errorf("the adopted session's end: %v, want exit 7 from its supervisor", e)
	}
}

// waitExitRecorded waits (bounded) until a session's supervisor has
// written its command's exit status into the daemon's state directory,
// and returns it.
func (f *fixture) waitExitRecorded(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		paths, _ := filepath.Glob(filepath.Join("/run", f.instance, "daemon", "*.exit"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
				return strings.TrimSpace(string(b))
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no exit status recorded in the state directory within 10 s")
	return ""
}
