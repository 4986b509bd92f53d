// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/tests/needs"
)

func TestMount(t *testing.T) {
	requireRoot(t)
	m, err := Mount()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(m, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		t.Fatalf("Mount() = %q, which statfs does not show as cgroup2 (%v)", m, err)
	}
	t.Logf("cgroup2 at %s", m)
}

func TestOpenRoot(t *testing.T) {
	r := newTestRoot(t)
	fi, err := os.Stat(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 || !fi.IsDir() {
		t.Errorf("root mode = %v, want a 0755 directory", fi.Mode())
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
		t.Errorf("root owned by uid %d, want 0", st.Uid)
	}
	id, err := r.ID()
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); id != st.Ino {
		t.Errorf("Root.ID() = %d, inode = %d; they agree on 64-bit kernels", id, st.Ino)
	}

	// Reopening an existing root is how a restarted daemon reclaims it.
	again, err := OpenRoot(r.Name())
	if err != nil {
		t.Fatalf("OpenRoot again: %v", err)
	}
	if !slices.Equal(again.Controllers(), r.Controllers()) {
		t.Errorf("Controllers() changed on reopen: %v -> %v", r.Controllers(), again.Controllers())
	}
	// Whatever OpenRoot claims must be what the kernel gives sessions.
	b, err := os.ReadFile(filepath.Join(r.Path(), "cgroup.subtree_control"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range wantedControllers {
		enabled := slices.Contains(strings.Fields(string(b)), c)
		if enabled != slices.Contains(r.Controllers(), c) {
			t.Errorf("controller %s: enabled in kernel = %v, Controllers() = %v", c, enabled, r.Controllers())
		}
	}
	t.Logf("controllers for sessions: %v; unavailable: %v", r.Controllers(), r.unavailable)
}

func TestOpenRootRefusesForeignOwner(t *testing.T) {
	r := newTestRoot(t)
	if err := os.Chown(r.Path(), nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRoot(r.Name()); err == nil || !strings.Contains(err.Error(), "owned by uid") {
		t.Errorf("OpenRoot of a root owned by uid %d: error = %v, want a refusal", nobody, err)
	}
}

func TestOpenRootRejectsBadNames(t *testing.T) {
	requireRoot(t)
	for _, name := range []string{"", "..", "a/b", "cgroup.procs"} {
		if _, err := OpenRoot(name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("OpenRoot(%q) error = %v, want ErrInvalidName", name, err)
		}
	}
}

func TestSessions(t *testing.T) {
	r := newTestRoot(t)
	a := newTestSession(t, r, "b-session")
	b := newTestSession(t, r, "a-session")
	if a.ID() == b.ID() || a.ID() == 0 {
		t.Errorf("session ids %d and %d, want distinct and non-zero", a.ID(), b.ID())
	}
	var st unix.Stat_t
	if err := unix.Stat(a.Path(), &st); err != nil {
		t.Fatal(err)
	}
	if a.ID() != st.Ino {
		t.Errorf("Session.ID() = %d, inode = %d", a.ID(), st.Ino)
	}
	if _, err := r.NewSession("a-session"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("NewSession of an existing session: error = %v, want fs.ErrExist", err)
	}
	got, err := r.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name() != "a-session" || got[1].Name() != "b-session" || got[0].ID() != b.ID() || got[1].ID() != a.ID() {
		t.Fatalf("Sessions() = %v, want a-session then b-session with matching ids", got)
	}
	s, err := r.Session("b-session")
	if err != nil || s.ID() != a.ID() || s.Path() != filepath.Join(r.Path(), "b-session") {
		t.Errorf("Session(b-session) = %v, %v", s, err)
	}
	if _, err := r.Session("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Session(missing) error = %v, want fs.ErrNotExist", err)
	}
	for _, name := range []string{"", ".", "..", "x/y", "../escape", "cgroup.kill", "a b"} {
		if _, err := r.NewSession(name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("NewSession(%q) error = %v, want ErrInvalidName", name, err)
		}
	}

	// The kernel refuses to remove a root that still has sessions.
	if err := r.Remove(); err == nil || !errors.Is(err, unix.EBUSY) {
		t.Errorf("Root.Remove with sessions: error = %v, want EBUSY", err)
	}
	for _, s := range got {
		if err := s.Remove(0); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Remove(); err != nil {
		t.Fatalf("Root.Remove: %v", err)
	}
	if _, err := os.Stat(r.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("root still there after Remove: %v", err)
	}
	if err := r.Remove(); err != nil {
		t.Errorf("second Root.Remove: %v, want nil", err)
	}
}

func TestLimits(t *testing.T) {
	r := newTestRoot(t)
	s := newTestSession(t, r, "limits")
	read := func(file string) string {
		b, err := os.ReadFile(filepath.Join(s.Path(), file))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	_, entries, err := findMount()
	if err != nil {
		t.Fatal(err)
	}
	// checkUnavailable asserts the documented error, and that on a hybrid
	// machine it names the v1 hierarchy that holds the controller.
	checkUnavailable := func(controller string, err error) {
		t.Helper()
		var ce *ControllerError
		if !errors.Is(err, ErrControllerUnavailable) || !errors.As(err, &ce) || ce.Controller != controller || ce.Reason == "" {
			t.Fatalf("%s limit without the controller: error = %v, want a *ControllerError", controller, err)
		}
		if v1 := v1MountOf(entries, controller); v1 != "" && !strings.Contains(err.Error(), v1) {
			t.Errorf("error %q does not name the v1 hierarchy at %s", err, v1)
		}
		t.Logf("%s unavailable, as documented: %v", controller, err)
	}

	for _, bad := range []int64{0, -2} {
		if err := s.SetPidsMax(bad); err == nil || errors.Is(err, ErrControllerUnavailable) {
			t.Errorf("SetPidsMax(%d) error = %v, want a value error", bad, err)
		}
		if err := s.SetMemoryMax(bad); err == nil || errors.Is(err, ErrControllerUnavailable) {
			t.Errorf("SetMemoryMax(%d) error = %v, want a value error", bad, err)
		}
	}

	if slices.Contains(r.Controllers(), "pids") {
		if err := s.SetPidsMax(64); err != nil {
			t.Fatal(err)
		}
		if got := read("pids.max"); got != "64" {
			t.Errorf("pids.max = %q, want 64", got)
		}
		if err := s.SetPidsMax(-1); err != nil || read("pids.max") != "max" {
			t.Errorf("SetPidsMax(-1) = %v, pids.max = %q", err, read("pids.max"))
		}
	} else {
		checkUnavailable("pids", s.SetPidsMax(64))
	}

	if slices.Contains(r.Controllers(), "memory") {
		if err := s.SetMemoryMax(512 << 20); err != nil {
			t.Fatal(err)
		}
		if got := read("memory.max"); got != "536870912" {
			t.Errorf("memory.max = %q, want 536870912", got)
		}
		if _, err := os.Stat(filepath.Join(s.Path(), "memory.swap.max")); err == nil && read("memory.swap.max") != "0" {
			t.Errorf("memory.swap.max = %q, want 0", read("memory.swap.max"))
		}
		if err := s.SetMemoryMax(-1); err != nil || read("memory.max") != "max" {
			t.Errorf("SetMemoryMax(-1) = %v, memory.max = %q", err, read("memory.max"))
		}
	} else {
		checkUnavailable("memory", s.SetMemoryMax(512<<20))
	}
}

func TestWriteErrorNamesFileAndData(t *testing.T) {
	r := newTestRoot(t)
	err := writeFile(r.mount, r.rel("no-such-file"), "hello")
	if err == nil || !strings.Contains(err.Error(), `write "hello" to `+filepath.Join(r.Path(), "no-such-file")) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("writeFile error = %v", err)
	}
	// RESOLVE_BENEATH: ".." must not lead out of the mount.
	if _, err := openBeneath(r.mount, "../etc/passwd", unix.O_RDONLY); err == nil {
		t.Error("openBeneath escaped the cgroup2 mount")
	}
}

// TestEnableControllers exercises the path that enables a controller in the
// mount root and in the sluice root, which the hybrid layout here never takes
// for pids and memory, with a controller this machine does offer to cgroup2.
func TestEnableControllers(t *testing.T) {
	requireRoot(t)
	mount, entries, err := findMount()
	if err != nil {
		t.Fatal(err)
	}
	offered, err := readList(mount, "cgroup.controllers")
	if err != nil {
		t.Fatal(err)
	}
	top, err := readList(mount, "cgroup.subtree_control")
	if err != nil {
		t.Fatal(err)
	}
	var c string
	for _, cand := range []string{"pids", "memory", "hugetlb", "cpu", "io", "rdma", "misc"} {
		if offered[cand] {
			c = cand
			break
		}
	}
	if c == "" {
		// A hybrid layout keeps the controllers on v1.
		needs.Absent(t, "cgroup2 at %s offers none of the controllers this test can try", mount)
	}
	if !top[c] {
		// Leave the machine as found. Cleanups run last-in first-out, and this
		// one is registered before the test root's, so it runs once the root
		// (whose own subtree_control would keep c busy) is gone.
		t.Cleanup(func() {
			if err := writeFile(mount, "cgroup.subtree_control", "-"+c); err != nil {
				t.Errorf("restore %s/cgroup.subtree_control: %v", mount, err)
			}
		})
	}
	r := newTestRoot(t)
	want := []string{c, "no-such-controller"}
	if err := r.enableControllers(want, entries); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Controllers(), []string{c}) {
		t.Fatalf("Controllers() = %v, want [%s]; unavailable: %v", r.Controllers(), c, r.unavailable)
	}
	if err := r.controllerErr("no-such-controller"); !errors.Is(err, ErrControllerUnavailable) {
		t.Errorf("controllerErr(no-such-controller) = %v", err)
	}
	s := newTestSession(t, r, "with-"+c)
	got, err := readList(mount, s.rel("cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	if !got[c] {
		t.Errorf("session cgroup.controllers lacks %s", c)
	}
	// A second call is idempotent (the state a reopened root sees).
	if err := r.enableControllers(want, entries); err != nil || !slices.Equal(r.Controllers(), []string{c}) {
		t.Errorf("second enableControllers: %v, Controllers() = %v", err, r.Controllers())
	}
}
