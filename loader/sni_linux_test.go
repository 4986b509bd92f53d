// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
)

// TestSetNames: the kernel name check's trie holds a session's exact
// names and wildcard domains as sni.c looks them up (the name reversed,
// then the full key length): an exact name matches itself only, a
// wildcard every name strictly under its domain, and neither another
// session's lookups; a later SetNames replaces the set, leaving other
// sessions' names alone.
func TestSetNames(t *testing.T) {
	f := newFixture(t)
	other := f.cgid + 1
	if err := f.dp.SetNames(f.cgid, []string{"registry.npmjs.org"}, []string{"githubusercontent.com"}); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.SetNames(other, []string{"evil.test"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.dp.SetNames(other, nil, nil) })
	lookup := func(cgid uint64, name string) bool {
		k, ok := sniKey(cgid, name, false)
		if !ok {
			t.Fatalf("no key for %q", name)
		}
		// sni.c looks up the whole key, the name's NUL included.
		k.Prefixlen = uint32(len(k.Data)) * 8
		var v uint8
		err := f.dp.objs.SniNames.Lookup(&k, &v)
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			t.Fatalf("lookup %q: %v", name, err)
		}
		return err == nil
	}
	for _, c := range []struct {
		cgid uint64
		name string
		want bool
	}{
		{f.cgid, "registry.npmjs.org", true},
		{f.cgid, "xregistry.npmjs.org", false},
		{f.cgid, "registry.npmjs.org.evil.test", false},
		{f.cgid, "npmjs.org", false},
		{f.cgid, "objects.githubusercontent.com", true},
		{f.cgid, "a.b.githubusercontent.com", true},
		{f.cgid, "githubusercontent.com", false},
		{f.cgid, "xgithubusercontent.com", false},
		{f.cgid, "evil.test", false},
		{other, "evil.test", true},
		{other, "registry.npmjs.org", false},
	} {
		if got := lookup(c.cgid, c.name); got != c.want {
			t.Errorf("session %d, %q: found %v, want %v", c.cgid, c.name, got, c.want)
		}
	}
	// Narrowed: the wildcard goes, the exact name stays.
	if err := f.dp.SetNames(f.cgid, []string{"registry.npmjs.org"}, nil); err != nil {
		t.Fatal(err)
	}
	if lookup(f.cgid, "objects.githubusercontent.com") || !lookup(f.cgid, "registry.npmjs.org") || !lookup(other, "evil.test") {
		t.Error("after narrowing: the wildcard is still there, or a name that stays is gone")
	}
	// A name too long for the kernel's check is not stored (its SNI is
	// refused as too long).
	long := make([]byte, SNINameMax)
	for i := range long {
		long[i] = 'a'
	}
	if _, ok := sniKey(f.cgid, string(long), false); ok {
		t.Errorf("a %d-byte name got a key", len(long))
	}
	if err := f.dp.SetNames(f.cgid, nil, nil); err != nil {
		t.Fatal(err)
	}
	if lookup(f.cgid, "registry.npmjs.org") {
		t.Error("after the session's end its names are still there")
	}
}
