// SPDX-License-Identifier: Apache-2.0

package cgroups

import "testing"

func TestSystemdNames(t *testing.T) {
	for _, c := range []struct{ instance, slice, scope string }{
		{"sluice", "sluice.slice", "sluice-run-7-ab.scope"},
		// A dash in a slice name nests it; instances keep theirs flat.
		{"sluice-test-1", "sluice_test_1.slice", "sluice_test_1-run-7-ab.scope"},
	} {
		if got := SliceName(c.instance); got != c.slice {
			t.Errorf("SliceName(%q) = %q, want %q", c.instance, got, c.slice)
		}
		r := &Root{name: c.slice, slice: c.slice}
		if got := r.SessionName("run-7-ab"); got != c.scope {
			t.Errorf("SessionName under %s = %q, want %q", c.slice, got, c.scope)
		}
		if err := validName(r.SessionName("run-7-ab")); err != nil {
			t.Errorf("scope name is not a valid session name: %v", err)
		}
	}
	// Without systemd, names are the caller's.
	if got := (&Root{name: "sluice"}).SessionName("run-7-ab"); got != "run-7-ab" {
		t.Errorf("SessionName without systemd = %q, want run-7-ab", got)
	}
}

// A scope is only ever created under a name SessionName made.
func TestNewScopeRefusesOtherNames(t *testing.T) {
	r := &Root{mount: t.TempDir(), name: "sluice.slice", slice: "sluice.slice"}
	if _, err := r.NewSession("run-7-ab"); err == nil {
		t.Fatal("NewSession(run-7-ab) under systemd: no error, want one naming *.scope")
	}
}
