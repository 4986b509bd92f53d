// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWritableBy(t *testing.T) {
	const u = 1000
	for _, tc := range []struct {
		name     string
		uid, gid uint32
		mode     uint32
		want     bool
	}{
		{"own 0700", u, u, 0o700, true},
		{"own 0500", u, u, 0o500, false},
		{"root 0755", 0, 0, 0o755, false},
		{"root 1777 (/tmp)", 0, 0, 0o1777, true},
		{"group-writable, a user's group", 0, 100, 0o775, true},
		{"group-writable, root's group", 0, 0, 0o775, false},
	} {
		st := unix.Stat_t{Uid: tc.uid, Gid: tc.gid, Mode: unix.S_IFDIR | tc.mode}
		if got := writableBy(st, u); got != tc.want {
			t.Errorf("%s: writableBy = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// replaceable follows the sticky bit: in /tmp a user replaces only what it
// owns.
func TestReplaceable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	dir := t.TempDir()
	sticky := filepath.Join(dir, "sticky")
	if err := os.Mkdir(sticky, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(sticky, 0o1777); err != nil {
		t.Fatal(err)
	}
	mine, theirs := filepath.Join(sticky, "mine"), filepath.Join(sticky, "theirs")
	for _, p := range []string{mine, theirs} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(mine, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{mine: true, theirs: false} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if got := replaceable(p, st, 1000); got != want {
			t.Errorf("replaceable(%s) = %v, want %v", filepath.Base(p), got, want)
		}
	}
}
