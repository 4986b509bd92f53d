// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// linkTree makes dir/home/u/.ssh/id (the hidden file) with other names
// dir/home/u/backup/id.bak and dir/elsewhere/deep/x, and an unrelated file.
func linkTree(t *testing.T) (dir, secret string, links []string) {
	t.Helper()
	dir = t.TempDir()
	secret = filepath.Join(dir, "home/u/.ssh/id")
	links = []string{filepath.Join(dir, "home/u/backup/id.bak"), filepath.Join(dir, "elsewhere/deep/x")}
	for _, p := range append([]string{secret, filepath.Join(dir, "home/u/other")}, links...) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "home/u/other"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if err := os.Link(secret, l); err != nil {
			t.Fatal(err)
		}
	}
	return dir, secret, links
}

func openTarget(t *testing.T, p string) target {
	t.Helper()
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return target{path: p, fd: fd}
}

func selfMounts(t *testing.T) []mount {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := parseMounts(f)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestFindLinks: the other names of a hidden file are found, near and
// far on its file system, and nothing else is.
func TestFindLinks(t *testing.T) {
	dir, secret, links := linkTree(t)
	budget := &linkBudget{entries: 1 << 20, deadline: time.Now().Add(time.Minute)}
	// The walk stops at the file's mount point; on this machine the
	// temporary directory may sit on / itself, so the budget may run out
	// there, after the test's tree (walked first, being nearer) is done.
	found, _ := findLinks([]target{openTarget(t, secret)}, selfMounts(t), map[string]bool{secret: true}, budget)
	var got []string
	for _, f := range found {
		unix.Close(f.fd)
		if strings.HasPrefix(f.path, dir) {
			got = append(got, f.path)
		}
	}
	slices.Sort(got)
	want := slices.Clone(links)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("found %v, want %v", got, want)
	}
}

// TestFindLinksBounded: a search cut short by its budget says which
// file may keep names it did not reach.
func TestFindLinksBounded(t *testing.T) {
	_, secret, _ := linkTree(t)
	budget := &linkBudget{entries: 2, deadline: time.Now().Add(time.Minute)}
	found, notes := findLinks([]target{openTarget(t, secret)}, selfMounts(t), map[string]bool{secret: true}, budget)
	for _, f := range found {
		unix.Close(f.fd)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], secret) || !strings.Contains(notes[0], "3 names") {
		t.Fatalf("notes %q: want one naming %s and its 3 names", notes, secret)
	}
}

// TestFindLinksSingleName: a file with one name costs no search.
func TestFindLinksSingleName(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	budget := &linkBudget{entries: 10, deadline: time.Now().Add(time.Minute)}
	found, notes := findLinks([]target{openTarget(t, p)}, selfMounts(t), map[string]bool{p: true}, budget)
	if len(found) != 0 || len(notes) != 0 || budget.entries != 10 {
		t.Fatalf("found %v, notes %v, budget %d: want no search", found, notes, budget.entries)
	}
}
