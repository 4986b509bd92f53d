// SPDX-License-Identifier: Apache-2.0

package suggest

import (
	"bytes"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
)

func entryStrings(p *allowlist.Policy) []string {
	var out []string
	for _, e := range p.Entries() {
		out = append(out, e.String())
	}
	slices.Sort(out)
	return out
}

func TestSuggestionBounded(t *testing.T) {
	s := New(nil)
	for i := range maxSuggested + 50 {
		s.addName(fmt.Sprintf("n%d.example", i))
		s.addAddr(netip.AddrFrom4([4]byte{203, 0, byte(i >> 8), byte(i)}))
	}
	if n := len(s.names) + len(s.addrs); n > maxSuggested {
		t.Errorf("remembered %d, want at most %d", n, maxSuggested)
	}
	if s.beyond == 0 {
		t.Errorf("nothing counted as beyond the bound")
	}
}

func TestSuggestionNothingRefused(t *testing.T) {
	base, _ := allowlist.FromStrings([]string{"api.example.com"})
	var out bytes.Buffer
	file := filepath.Join(t.TempDir(), "s.json")
	if err := New(nil).Write(file, base, &out); err != nil {
		t.Fatal(err)
	}
	got, err := allowlist.Load(file)
	if err != nil || !slices.Equal(entryStrings(got), []string{"api.example.com"}) {
		t.Errorf("got %v, %v", got, err)
	}
	if !strings.Contains(out.String(), "nothing added") {
		t.Errorf("output: %s", out.String())
	}
	if err := New(nil).Write(filepath.Join(t.TempDir(), "missing", "s.json"), base, &out); err == nil {
		t.Errorf("writing into a missing directory succeeded")
	}
}

func TestSuggestionSearchExpansions(t *testing.T) {
	base, _ := allowlist.FromStrings([]string{"api.github.com"})
	s := New(nil)
	s.search = []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}
	for _, n := range []string{
		"api.github.com.default.svc.cluster.local", // the allowed name, expanded
		"api.github.com.cluster.local",
		"registry.npmjs.org",
		"registry.npmjs.org.svc.cluster.local", // a suggested name, expanded
		"db.corp.example",                      // "db" expanded: meant
		"other.example.corp.example",           // other.example was never asked for itself
	} {
		s.addName(n)
	}
	got := s.Additions(base)
	want := []string{"db.corp.example", "other.example.corp.example", "registry.npmjs.org"}
	if !slices.Equal(got, want) {
		t.Errorf("additions %v, want %v", got, want)
	}
	var out bytes.Buffer
	merged, add, _ := s.Render(base)
	s.Explain(&out, "f", merged, add)
	if !strings.Contains(out.String(), "left out 3 names") {
		t.Errorf("explanation: %s", out.String())
	}
}
