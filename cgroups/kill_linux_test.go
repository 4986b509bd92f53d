// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKillBySignal runs the pre-5.14 path (freeze, SIGKILL each pid) on this
// kernel, which would otherwise always take cgroup.kill.
func TestKillBySignal(t *testing.T) {
	r := newTestRoot(t)
	s := newTestSession(t, r, "fallback")
	startAsNobody(t, s, "sh", "-c", "sleep 100 & sleep 100 & wait")
	eventually(t, 5*time.Second, "three processes in the session", func() bool {
		procs, err := s.Procs()
		return err == nil && len(procs) >= 3
	})
	if err := s.killBySignal(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatalf("killBySignal: %v", err)
	}
	if err := s.waitUnpopulated(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// A killed session must not be left frozen (the deferred thaw).
	if b, err := os.ReadFile(filepath.Join(s.Path(), "cgroup.freeze")); err != nil || strings.TrimSpace(string(b)) != "0" {
		t.Errorf("cgroup.freeze = %q, %v; want 0", b, err)
	}
}

func TestKillEmptySession(t *testing.T) {
	r := newTestRoot(t)
	s := newTestSession(t, r, "empty")
	if err := s.Kill(); err != nil {
		t.Errorf("Kill of an empty session: %v", err)
	}
	if err := s.killBySignal(time.Now().Add(time.Second)); err != nil {
		t.Errorf("killBySignal of an empty session: %v", err)
	}
	if err := s.Remove(time.Second); err != nil {
		t.Errorf("Remove of an empty session: %v", err)
	}
}

func TestInCgroup(t *testing.T) {
	requireRoot(t)
	self, err := cgroupOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !inCgroup(os.Getpid(), self) {
		t.Errorf("inCgroup(self, %q) = false", self)
	}
	if inCgroup(os.Getpid(), "/no-such-root/no-such-session") {
		t.Error("inCgroup matched a cgroup this process is not in")
	}
}
