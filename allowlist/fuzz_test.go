// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse and, as a single entry, to
// ParseEntry. Neither may panic; whatever parses must survive a round trip
// through its canonical form unchanged, and must match itself.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"allowed_hosts": ["api.example.com", "*.githubusercontent.com", "203.0.113.5", "2001:db8::/32"]}`,
		`{"allowed_hosts": [{"host": "api.example.com", "owner": "provider:example", "allow_private": true}, "api.example.com"]}`,
		`{"allowed_hosts": ["bücher.example", "*.EXAMPLE.org.", "::ffff:203.0.113.0/120", "[2001:db8::1]", "203.0.113.7/24"]}`,
		`{"allowed_hosts": []}`,
		`{}`,
		`{"allowed_hosts": null}`,
		`{"allowed_hosts": ["https://api.example.com/v1", "api.example.com:443", "*", "*.com", "300.1.1.1"]}`,
		`{"allowed_host": []}`,
		`["api.example.com"]`,
		`{"allowed_hosts": [`,
		"api.example.com",
		"*.example.com",
		"xn--bcher-kva.example",
		"_acme.example.com",
		"r3---sn-abc.example.net",
		"api。example。com",
		"198.51.100.0/24",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkEntry(t, string(data))
		p, err := Parse(data)
		if err != nil {
			if p != nil {
				t.Fatalf("Parse returned a policy and the error %v", err)
			}
			return
		}
		checkPolicy(t, p)
	})
}

func checkEntry(t *testing.T, s string) {
	e, err := ParseEntry(s)
	if err != nil {
		return
	}
	e2, err := ParseEntry(e.String())
	if err != nil {
		t.Fatalf("ParseEntry(%q) gave %q, which does not parse: %v", s, e.String(), err)
	}
	if !reflect.DeepEqual(e, e2) {
		t.Fatalf("ParseEntry(%q) = %+v, but its text %q parses as %+v", s, e, e.String(), e2)
	}
	p, err := New([]Entry{e})
	if err != nil {
		t.Fatalf("New(ParseEntry(%q)): %v", s, err)
	}
	checkPolicy(t, p)
}

func checkPolicy(t *testing.T, p *Policy) {
	for _, out := range [][]byte{p.Format(), mustMarshalFuzz(t, p)} {
		q, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", out, err)
		}
		if !reflect.DeepEqual(q.Entries(), p.Entries()) {
			t.Fatalf("round trip changed the entries:\n%+v\n%+v", p.Entries(), q.Entries())
		}
		if !bytes.Equal(q.Format(), p.Format()) {
			t.Fatalf("round trip changed the file:\n%s\n%s", p.Format(), q.Format())
		}
	}
	for _, e := range p.Entries() {
		switch e.Kind {
		case KindHost:
			if m, ok := p.MatchName(e.Name); !ok || m.String() != e.String() {
				t.Fatalf("%s does not match itself: %v %v", e, m, ok)
			}
		case KindWildcard:
			if _, ok := p.MatchName(e.Name); ok && !hasHost(p, e.Name) {
				t.Fatalf("%s matches its apex", e)
			}
			if sub := "x." + e.Name; len(sub) <= maxNameLen && !strings.HasSuffix(e.Name, "localhost") {
				if _, ok := p.MatchName(sub); !ok {
					t.Fatalf("%s does not match %s", e, sub)
				}
			}
		case KindPrefix:
			if !p.AllowsAddr(e.Prefix.Addr()) {
				t.Fatalf("%s does not allow its own address", e)
			}
		}
	}
	if _, err := p.Narrow(p); err != nil {
		t.Fatalf("a policy does not narrow itself: %v", err)
	}
}

func hasHost(p *Policy, name string) bool {
	for _, e := range p.Entries() {
		if e.Kind == KindHost && e.Name == name {
			return true
		}
	}
	return false
}

func mustMarshalFuzz(t *testing.T, p *Policy) []byte {
	out, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
