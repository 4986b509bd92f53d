// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/needs"
)

// nobody is the unprivileged identity the spawn tests run commands as; it
// need not exist in /etc/passwd.
const nobody = 65534

// requireRoot skips privileged tests with a message that says what to do
// (a failure under SLUICE_REQUIRE_KERNEL=1): they create cgroups and spawn
// processes as another user.
func requireRoot(t *testing.T) {
	t.Helper()
	needs.Have(t, needs.Datapath...)
	if _, err := Mount(); err != nil {
		needs.Skip(t, "needs a cgroup2 mount: %v", err)
	}
}

// newTestRoot opens a root with a random name, so tests never touch a real
// "sluice" root or each other, and removes it and its sessions at cleanup,
// also when the test fails.
func newTestRoot(t *testing.T) *Root {
	t.Helper()
	requireRoot(t)
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRoot("sluice-test-" + hex.EncodeToString(b))
	if err != nil {
		t.Fatalf("OpenRoot: %v", err)
	}
	t.Cleanup(func() {
		sessions, err := r.Sessions()
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cleanup: %v", err)
		}
		for _, s := range sessions {
			if err := s.Remove(5 * time.Second); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		if err := r.Remove(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return r
}

func newTestSession(t *testing.T, r *Root, name string) *Session {
	t.Helper()
	s, err := r.NewSession(name)
	if err != nil {
		t.Fatalf("NewSession(%q): %v", name, err)
	}
	return s
}

// startAsNobody starts argv in s as uid/gid 65534 and makes sure, at
// cleanup, that the process is killed and reaped.
func startAsNobody(t *testing.T, s *Session, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := s.Start(cmd, SpawnOptions{UID: nobody, GID: nobody}); err != nil {
		t.Fatalf("Start(%v): %v", argv, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		waitCmd(t, cmd, 5*time.Second)
	})
	return cmd
}

// waitCmd reaps cmd, giving up after timeout; it returns cmd.Wait's error.
func waitCmd(t *testing.T, cmd *exec.Cmd, timeout time.Duration) error {
	t.Helper()
	if cmd.ProcessState != nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		t.Errorf("pid %d not reaped within %v", cmd.Process.Pid, timeout)
		return nil
	}
}

// eventually polls cond every 10ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procStatus returns the "Key:\tvalue" lines of /proc/<pid>/status (or of
// any other path under /proc given as pid, such as "self/task/123").
func procStatus(t *testing.T, pid string) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatalf("read status of %s: %v", pid, err)
	}
	m := make(map[string]string)
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// cgroupOf returns the cgroup2 line of /proc/<pid>/cgroup, without "0::".
func cgroupOf(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no cgroup2 line")
}
