// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSessionOf(t *testing.T) {
	r := newTestRoot(t)
	s, err := r.NewSession("find-me")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.SessionOf(s.ID()); err != nil || got != "find-me" {
		t.Fatalf("SessionOf(session) = %q, %v", got, err)
	}
	// A cgroup below a session (a container runtime's) belongs to it.
	nested := filepath.Join(s.Path(), "inner", "deeper")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.Remove(nested)
		_ = os.Remove(filepath.Dir(nested))
	})
	id, err := cgroupIDOf(r.mount, r.rel("find-me", "inner", "deeper"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.SessionOf(id); err != nil || got != "find-me" {
		t.Fatalf("SessionOf(nested cgroup) = %q, %v", got, err)
	}
	// The root itself and cgroups elsewhere are no session.
	rootID, err := cgroupIDOf(r.mount, r.name)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.SessionOf(rootID); err == nil {
		t.Fatalf("SessionOf(root) = %q, want an error", got)
	}
	// A removed cgroup is gone.
	if err := os.Remove(nested); err != nil {
		t.Fatal(err)
	}
	if got, err := r.SessionOf(id); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("SessionOf(removed cgroup) = %q, %v; want ErrNotExist", got, err)
	}
}
