// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/cgroups"
)

// TestCheckCommand: the daemon's look at a command, as the user it will
// run as (uid 65534 here), says what exec would.
func TestCheckCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the check takes the user's file-system ids")
	}
	dir := t.TempDir()
	_ = os.Chmod(filepath.Dir(dir), 0o755)
	_ = os.Chmod(dir, 0o755)
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	prog := write("prog", 0o755)
	write("plain", 0o644)
	write("owneronly", 0o700) // root's: uid 65534 may not run it
	private := filepath.Join(dir, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(private, "prog"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	user := cgroups.SpawnOptions{UID: 65534, GID: 65534}
	for _, c := range []struct {
		dir, path, want string // want "": runs
	}{
		{"", prog, ""},
		{dir, "./prog", ""},
		{"", "/bin/sh", ""},
		{"", dir, "is a directory"},
		{"", filepath.Join(dir, "plain"), "permission denied"},
		{"", filepath.Join(dir, "owneronly"), "permission denied"},
		{"", filepath.Join(dir, "missing"), "no such file or directory"},
		// Root could see into private/; the user cannot, and learns
		// nothing about what is in there.
		{"", filepath.Join(private, "prog"), "permission denied"},
		{"", filepath.Join(private, "missing"), "permission denied"},
		{private, "./prog", "chdir " + private + ": permission denied"},
		{filepath.Join(dir, "nodir"), "./prog", "chdir"},
		{"", "/dev/null", "not a regular file"},
	} {
		err := checkCommand(user, c.dir, c.path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("dir %q path %q: %v, want it to run", c.dir, c.path, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("dir %q path %q: %v, want %q", c.dir, c.path, err, c.want)
		}
	}
	// The daemon's own threads kept their ids.
	if f, err := os.Open(filepath.Join(private, "prog")); err != nil {
		t.Errorf("after the checks the daemon cannot read what root can: %v", err)
	} else {
		f.Close()
	}
}
