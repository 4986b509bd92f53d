// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// as is uid:gid with the supplementary groups groups (none: no
// supplementary group at all).
func as(uid, gid uint32, groups ...uint32) *syscall.SysProcAttr {
	if groups == nil {
		groups = []uint32{}
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
}

// socketPerm is the API socket's owner, group and permission bits.
func socketPerm(t *testing.T, path string) (uid, gid uint32, perm os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("%s is not a socket: %v", path, fi.Mode())
	}
	return st.Uid, st.Gid, fi.Mode().Perm()
}

// TestSocketOnlyForTheGroup: the daemon's socket is root:GROUP 0660 for
// --group GROUP, so a uid outside the group cannot even connect (EACCES
// on the socket file, and sluice says why), while a member through a
// supplementary group connects (the twin). Without the group the socket
// is root's alone (0600); --socket-mode 0666 lets everyone connect, and
// a non-member is then refused per request (403).
func TestSocketOnlyForTheGroup(t *testing.T) {
	t.Run("group", func(t *testing.T) {
		f := newFixture(t, "203.0.113.10")
		if uid, gid, perm := socketPerm(t, f.sock); uid != 0 || gid != 65534 || perm != 0o660 {
			t.Errorf("socket %d:%d %#o, want 0:65534 0660", uid, gid, perm)
		}
		if r := f.w.RunProbe(t, as(65533, 65533), "-timeout", "300ms", "unix", f.sock); r.OK || r.Errno != "EACCES" || r.Stage != "connect" {
			t.Errorf("uid 65533 outside the group: %s, want EACCES at connect", r)
		}
		// The twin: the same uid, in the group as a supplementary group,
		// connects (and the daemon then waits for a request).
		if r := f.w.RunProbe(t, as(65533, 65533, 65534), "-timeout", "300ms", "unix", f.sock); r.Stage != "read" {
			t.Errorf("uid 65533 in the group: %s, want a connect that succeeds", r)
		}
		if _, stderr, code := f.sluice(t, 65533, 65533, "run", "--", "true"); code == 0 || !strings.Contains(stderr, "permission denied: only root and members of the daemon's group") {
			t.Errorf("sluice run outside the group: exit %d %s, want a refusal that says why", code, stderr)
		}
		if _, _, code := f.sluiceGroups(t, f.w.StartInClient, 65533, 65533, []uint32{65534}, "status"); code != 0 {
			t.Errorf("sluice status in the group: exit %d", code)
		}
		// A stopped daemon removes its own socket.
		f.stopDaemonGracefully(t)
		if _, err := os.Lstat(f.sock); err == nil {
			t.Error("the stopped daemon left its socket")
		}
		f.startDaemon(t)
		if left, _ := filepath.Glob(filepath.Join(f.dir, ".sluice-*.sock")); len(left) > 0 {
			t.Errorf("temporary socket names were left: %v", left)
		}
	})
	t.Run("no-group", func(t *testing.T) {
		f := newFixtureFlags(t, []string{"--group", "sluice-e2e-no-such-group"}, "203.0.113.10")
		if uid, gid, perm := socketPerm(t, f.sock); uid != 0 || gid != 0 || perm != 0o600 {
			t.Errorf("socket %d:%d %#o, want 0:0 0600", uid, gid, perm)
		}
		if r := f.w.RunProbe(t, as(65534, 65534), "-timeout", "300ms", "unix", f.sock); r.OK || r.Errno != "EACCES" {
			t.Errorf("uid 65534 with no session group: %s, want EACCES", r)
		}
		if r := f.w.RunProbe(t, nil, "-timeout", "300ms", "unix", f.sock); r.Stage != "read" {
			t.Errorf("root: %s, want a connect that succeeds", r)
		}
	})
	t.Run("socket-mode-0666", func(t *testing.T) {
		f := newFixtureFlags(t, []string{"--socket-mode", "0666"}, "203.0.113.10")
		if uid, gid, perm := socketPerm(t, f.sock); uid != 0 || gid != 65534 || perm != 0o666 {
			t.Errorf("socket %d:%d %#o, want 0:65534 0666", uid, gid, perm)
		}
		if _, stderr, code := f.sluice(t, 65533, 65533, "run", "--", "true"); code == 0 || !strings.Contains(stderr, "may not create sessions") {
			t.Errorf("a user outside the group created a session through a 0666 socket (exit %d): %s", code, stderr)
		}
	})
}
