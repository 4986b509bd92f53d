// SPDX-License-Identifier: Apache-2.0

package exitstatus

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor's status is the command's, for an exit code and for a
// death by signal, and the file says the same.
func TestSuperviseRecordsTheCommandsStatus(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"kill -TERM $$", 128 + int(unix.SIGTERM)},
	} {
		path := filepath.Join(t.TempDir(), "s.exit")
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		got := Supervise(exec.Command("/bin/sh", "-c", tc.script), f)
		f.Close()
		if got != tc.want {
			t.Errorf("%s: Supervise = %d, want %d", tc.script, got, tc.want)
		}
		if c, ok, err := Read(path); c != tc.want || !ok || err != nil {
			t.Errorf("%s: file says %d %v %v, want %d", tc.script, c, ok, err, tc.want)
		}
	}
}

// A missing command is 127, as a shell says.
func TestSuperviseMissingCommand(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "exit")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := Supervise(exec.Command("/nonexistent/cmd"), f); got != 127 {
		t.Errorf("Supervise = %d, want 127", got)
	}
}

// Signals sent to the supervisor reach the command.
func TestSuperviseForwardsSignals(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "exit")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command("/bin/sh", "-c", `trap 'exit 42' USR1; touch `+ready+`; while :; do sleep 0.05; done`)
	done := make(chan int, 1)
	go func() { done <- Supervise(cmd, f) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The test process is the supervisor here.
	_ = unix.Kill(os.Getpid(), unix.SIGUSR1)
	select {
	case got := <-done:
		if got != 42 {
			t.Errorf("Supervise = %d, want 42 (the command's USR1 trap)", got)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the command did not get SIGUSR1 within 10 s")
	}
}
