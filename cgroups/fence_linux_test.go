// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A fence refuses the cgroup an engine would make in it (as runc's mkdir
// for --cgroup-parent=<the other form>/<id>), and opening a root of the
// fenced name lifts the fence, so that a switch of cgroup manager never
// locks sluice out of its own root.
func TestFence(t *testing.T) {
	r := newTestRoot(t)
	if got, want := r.FenceName(), SliceName(r.Name()); got != want {
		t.Fatalf("FenceName of a cgroupfs root: %q, want %q", got, want)
	}
	t.Cleanup(func() { _ = os.Remove(r.FencePath()) })
	if err := r.Fence(); err != nil {
		t.Fatal(err)
	}
	// The unfenced twin: a sibling cgroup takes children.
	twin := r.FencePath() + "-twin"
	if err := os.MkdirAll(filepath.Join(twin, "child"), 0o755); err != nil {
		t.Fatalf("an ordinary cgroup refuses a child: %v", err)
	}
	_ = os.Remove(filepath.Join(twin, "child"))
	_ = os.Remove(twin)
	// Where the kernel has no cgroup v1 hierarchies, the fence refuses
	// the mkdir; on a hybrid host it takes the cgroup, frozen.
	err := os.Mkdir(filepath.Join(r.FencePath(), "0123456789abcdef"), 0o755)
	if len(V1Hierarchies()) == 0 {
		if !errors.Is(err, unix.EAGAIN) {
			t.Fatalf("mkdir in the fence: %v, want EAGAIN", err)
		}
	} else {
		if err != nil {
			t.Fatalf("mkdir in the fence (hybrid host): %v", err)
		}
		b, _ := os.ReadFile(filepath.Join(r.FencePath(), "0123456789abcdef", "cgroup.events"))
		if !strings.Contains(string(b), "frozen 1") {
			t.Fatalf("a cgroup made in the fence is not frozen: %q", b)
		}
	}
	// Fencing again is fine.
	if err := r.Fence(); err != nil {
		t.Fatalf("fence again: %v", err)
	}
	// A root of the fenced name lifts it.
	other, err := OpenRoot(r.FenceName())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(other.Path(), "s"), 0o755); err != nil {
		t.Fatalf("a root of the fenced name refuses a session after OpenRoot: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(other.Path(), "s", "cgroup.events")); !strings.Contains(string(b), "frozen 0") {
		t.Fatalf("a session in a root of the fenced name is frozen after OpenRoot: %q", b)
	}
	_ = os.Remove(filepath.Join(other.Path(), "s"))
	if err := r.Unfence(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.FencePath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Unfence left %s: %v", r.FencePath(), err)
	}
}
