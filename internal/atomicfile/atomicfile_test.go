// SPDX-License-Identifier: Apache-2.0

package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o644, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "new" {
		t.Fatalf("read %q, %v; want new", b, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v; want 0644", fi.Mode(), err)
	}
	assertOnly(t, dir, "f.json")
}

// A failing prepare leaves the old file and no temporary one.
func TestWriteFailureKeepsTheOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := Write(path, []byte("new"), 0o600, func(*os.File) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want prepare's", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("file reads %q after a failed replacement", b)
	}
	assertOnly(t, dir, "f")
	if err := Write(filepath.Join(dir, "missing", "f"), nil, 0o600, nil); err == nil {
		t.Error("a missing directory: no error")
	}
}

func assertOnly(t *testing.T, dir, name string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Name() != name {
		t.Errorf("directory holds %v, want only %s", es, name)
	}
}
