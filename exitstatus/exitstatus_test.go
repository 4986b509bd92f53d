// SPDX-License-Identifier: Apache-2.0

package exitstatus

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteThenRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.exit")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok, err := Read(path); ok || err != nil {
		t.Fatalf("empty file: ok=%v err=%v, want no status and no error", ok, err)
	}
	// A longer status first, then a shorter one: nothing of the first stays.
	for _, code := range []int{137, 7, 0} {
		if err := Write(f, code); err != nil {
			t.Fatal(err)
		}
		got, ok, err := Read(path)
		if err != nil || !ok || got != code {
			t.Errorf("Read after Write(%d) = %d, %v, %v", code, got, ok, err)
		}
	}
	if _, ok, err := Read(filepath.Join(t.TempDir(), "missing")); ok || err != nil {
		t.Errorf("missing file: ok=%v err=%v", ok, err)
	}
}

func TestParseRefusesWhatIsNotAStatus(t *testing.T) {
	for _, in := range []string{"x\n", "-1\n", "256\n", "1 2\n", "99999999999999999999\n"} {
		if _, ok, err := Parse([]byte(in)); ok || err == nil {
			t.Errorf("Parse(%q): ok=%v err=%v, want an error", in, ok, err)
		}
	}
	if c, ok, err := Parse([]byte(" 42 \n")); c != 42 || !ok || err != nil {
		t.Errorf("Parse(42) = %d %v %v", c, ok, err)
	}
}
