// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func mustStrings(t *testing.T, entries ...string) *Policy {
	t.Helper()
	p, err := FromStrings(entries)
	if err != nil {
		t.Fatalf("FromStrings(%q): %v", entries, err)
	}
	return p
}

func mustParse(t *testing.T, data string) *Policy {
	t.Helper()
	p, err := Parse([]byte(data))
	if err != nil {
		t.Fatalf("Parse(%s): %v", data, err)
	}
	return p
}

func texts(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.String())
	}
	return out
}

func TestMatchName(t *testing.T) {
	p := mustStrings(t,
		"api.example.com",
		"*.example.com",
		"*.deep.example.com",
		"xn--bcher-kva.example",
		"*.example.org",
		"203.0.113.5",
	)
	tests := []struct {
		query string
		want  string // matching entry, "" for none
	}{
		{"api.example.com", "api.example.com"},
		{"API.EXAMPLE.COM.", "api.example.com"},
		{"www.example.com", "*.example.com"},
		{"a.b.c.example.com", "*.example.com"},
		{"x.api.example.com", "*.example.com"},
		{"example.com", ""}, // the apex is not under its wildcard
		{"deep.example.com", "*.example.com"},
		{"x.deep.example.com", "*.deep.example.com"}, // the most specific wildcard wins
		{"y.x.deep.example.com", "*.deep.example.com"},
		{"bücher.example", "xn--bcher-kva.example"},
		{"BÜCHER.example.", "xn--bcher-kva.example"},
		{"www.example.org", "*.example.org"},
		{"example.org", ""},
		{"badexample.com", ""},
		{"example.com.evil.test", ""},
		{"203.0.113.5", ""}, // addresses are not names
		{"", ""},
		{"not a name", ""},
		{"*.example.com", ""},
	}
	for _, tt := range tests {
		e, ok := p.MatchName(tt.query)
		got := ""
		if ok {
			got = e.String()
		}
		if got != tt.want {
			t.Errorf("MatchName(%q) = %q, %v; want %q", tt.query, got, ok, tt.want)
		}
	}
}

func TestMatchNameAllowPrivate(t *testing.T) {
	p := mustParse(t, `{"allowed_hosts": [
		{"host": "*.example.com", "allow_private": true},
		"*.internal.example.com",
		"db.internal.example.com",
		{"host": "cache.internal.example.com", "allow_private": true}
	]}`)
	for name, want := range map[string]bool{
		"www.example.com":            true,
		"x.internal.example.com":     false, // the more specific wildcard decides
		"db.internal.example.com":    false,
		"cache.internal.example.com": true,
	} {
		e, ok := p.MatchName(name)
		if !ok || e.AllowPrivate != want {
			t.Errorf("MatchName(%q) = %+v, %v; want AllowPrivate %v", name, e, ok, want)
		}
	}
}

func TestAllowsAddr(t *testing.T) {
	p := mustStrings(t, "203.0.113.0/25", "198.51.100.7", "2001:db8::/32", "api.example.com")
	for addr, want := range map[string]bool{
		"203.0.113.1":         true,
		"203.0.113.127":       true,
		"203.0.113.128":       false,
		"198.51.100.7":        true,
		"198.51.100.8":        false,
		"::ffff:203.0.113.9":  true, // mapped addresses follow the IPv4 rules
		"::ffff:198.51.100.8": false,
		"2001:db8::1":         true,
		"2001:db8:ffff::1":    true,
		"2001:db9::1":         false,
		"fe80::1%eth0":        false,
		"2001:db8::1%eth0":    true,
		"127.0.0.1":           false, // loopback is the datapath's business
		"::1":                 false,
	} {
		if got := p.AllowsAddr(netip.MustParseAddr(addr)); got != want {
			t.Errorf("AllowsAddr(%s) = %v, want %v", addr, got, want)
		}
	}
	if p.AllowsAddr(netip.Addr{}) {
		t.Error("AllowsAddr(invalid) = true")
	}
	// An IPv6 prefix never covers IPv4, even ::/0.
	all6 := mustStrings(t, "::/0")
	if all6.AllowsAddr(netip.MustParseAddr("203.0.113.1")) || all6.AllowsAddr(netip.MustParseAddr("::ffff:203.0.113.1")) {
		t.Error("::/0 allowed an IPv4 address")
	}
}

func TestEmptyAndNilPolicy(t *testing.T) {
	var nilP *Policy
	empty := mustStrings(t)
	for _, p := range []*Policy{nilP, empty, mustParse(t, `{}`), mustParse(t, `{"allowed_hosts": []}`), mustParse(t, `{"allowed_hosts": null}`)} {
		if p.Len() != 0 || len(p.Entries()) != 0 || len(p.Prefixes()) != 0 || len(p.Names()) != 0 {
			t.Errorf("empty policy has entries: %v", p.Entries())
		}
		if _, ok := p.MatchName("localhost"); ok {
			t.Error("empty policy matched localhost")
		}
		if p.AllowsAddr(netip.MustParseAddr("127.0.0.1")) {
			t.Error("empty policy has an explicit loopback entry")
		}
		if got := string(p.Format()); got != "{\n  \"allowed_hosts\": []\n}\n" {
			t.Errorf("Format() = %q", got)
		}
	}
}

func TestDedup(t *testing.T) {
	p := mustStrings(t,
		"api.example.com", "*.example.com", "API.example.com.", "203.0.113.7/24",
		"203.0.113.0/24", "::ffff:203.0.113.0/120", "*.EXAMPLE.com", "bücher.example", "xn--bcher-kva.example",
		"[2001:db8::1]", "2001:db8::1",
	)
	want := []string{"api.example.com", "*.example.com", "203.0.113.0/24", "xn--bcher-kva.example", "2001:db8::1"}
	if got := texts(p.Entries()); !reflect.DeepEqual(got, want) {
		t.Errorf("Entries() = %q, want %q", got, want)
	}
	if got := texts(p.Names()); !reflect.DeepEqual(got, []string{"api.example.com", "*.example.com", "xn--bcher-kva.example"}) {
		t.Errorf("Names() = %q", got)
	}
	wantPrefixes := []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::1/128")}
	if got := p.Prefixes(); !reflect.DeepEqual(got, wantPrefixes) {
		t.Errorf("Prefixes() = %v, want %v", got, wantPrefixes)
	}
}

func TestOwnersMerged(t *testing.T) {
	p := mustParse(t, `{"allowed_hosts": [
		{"host": "api.example.com", "owner": "provider:a"},
		"other.example.com",
		{"host": "API.example.com.", "owner": "provider:b", "allow_private": true},
		{"host": "api.example.com", "owner": "provider:a"},
		"api.example.com"
	]}`)
	es := p.Entries()
	if len(es) != 2 {
		t.Fatalf("Entries() = %+v", es)
	}
	want := Entry{Kind: KindHost, Name: "api.example.com", AllowPrivate: true, Owners: []string{"provider:a", "provider:b", ""}}
	if !reflect.DeepEqual(es[0], want) {
		t.Errorf("merged entry %+v, want %+v", es[0], want)
	}
	if es[1].Owners != nil {
		t.Errorf("plain entry has owners %q", es[1].Owners)
	}
}

func TestEntriesAreCopies(t *testing.T) {
	p := mustParse(t, `{"allowed_hosts": [{"host": "api.example.com", "owner": "a"}, "203.0.113.5"]}`)
	es := p.Entries()
	es[0].Owners[0] = "changed"
	es[0].Name = "changed.example.com"
	pf := p.Prefixes()
	pf[0] = netip.MustParsePrefix("198.51.100.0/24")
	if e, _ := p.MatchName("api.example.com"); e.Owners[0] != "a" {
		t.Errorf("policy changed through Entries(): %+v", e)
	}
	if !p.AllowsAddr(netip.MustParseAddr("203.0.113.5")) || p.AllowsAddr(netip.MustParseAddr("198.51.100.1")) {
		t.Error("policy changed through Prefixes()")
	}
}

func TestFromStringsErrors(t *testing.T) {
	p, err := FromStrings([]string{"api.example.com", "https://api.example.com/v1", "ok.example.com", "api.example.com:443", ""})
	if p != nil {
		t.Errorf("got a policy despite errors: %v", p.Entries())
	}
	var pe *Error
	if !errors.As(err, &pe) || len(pe.Problems) != 3 {
		t.Fatalf("error %v, want an *Error with 3 problems", err)
	}
	wantIdx := []int{1, 3, 4}
	for i, prob := range pe.Problems {
		var ee *EntryError
		if !errors.As(prob, &ee) {
			t.Fatalf("problem %v is not an *EntryError", prob)
		}
		if ee.Index != wantIdx[i] || ee.Line != 0 {
			t.Errorf("problem %d: index %d line %d, want index %d line 0", i, ee.Index, ee.Line, wantIdx[i])
		}
	}
	msg := err.Error()
	for _, want := range []string{
		`3 problems`,
		`entry[1] "https://api.example.com/v1": give the host name "api.example.com", not a URL`,
		`entry[3] "api.example.com:443": a port is not part of the host`,
		`entry[4] "": empty entry`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
}

func TestNew(t *testing.T) {
	p, err := New([]Entry{
		{Kind: KindHost, Name: "API.Example.com."},
		{Kind: KindWildcard, Name: "example.org", AllowPrivate: true, Owners: []string{"x"}},
		{Kind: KindPrefix, Prefix: netip.MustParsePrefix("::ffff:203.0.113.7/120")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(p.Entries()); !reflect.DeepEqual(got, []string{"api.example.com", "*.example.org", "203.0.113.0/24"}) {
		t.Errorf("Entries() = %q", got)
	}
	// Entries round-trip through New.
	p2, err := New(p.Entries())
	if err != nil || !reflect.DeepEqual(p2.Entries(), p.Entries()) {
		t.Errorf("New(Entries()) = %+v, %v", p2.Entries(), err)
	}

	bad := []Entry{
		{},
		{Kind: KindHost, Name: "*.example.com"},
		{Kind: KindHost, Name: "203.0.113.5"},
		{Kind: KindWildcard, Name: "com"},
		{Kind: KindPrefix},
		{Kind: KindPrefix, Prefix: netip.MustParsePrefix("203.0.113.0/24"), AllowPrivate: true},
		{Kind: KindHost, Name: "ok.example.com", Owners: []string{" padded"}},
	}
	p, err = New(bad)
	var pe *Error
	if p != nil || !errors.As(err, &pe) || len(pe.Problems) != len(bad) {
		t.Fatalf("New(bad) = %v, %v; want every entry rejected", p, err)
	}
	for _, want := range []string{"invalid kind", "is a wildcard entry, not a host entry", "is a prefix entry, not a host entry", "too broad", "invalid prefix", "allow_private applies to host names only", "white space"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestMerge(t *testing.T) {
	file := mustParse(t, `{"allowed_hosts": ["api.example.com", {"host": "*.example.org", "owner": "o"}]}`)
	flags := mustStrings(t, "*.example.org", "203.0.113.5", "api.example.com")
	m := file.Merge(flags)
	if got := texts(m.Entries()); !reflect.DeepEqual(got, []string{"api.example.com", "*.example.org", "203.0.113.5"}) {
		t.Errorf("Merge entries %q", got)
	}
	if e, _ := m.MatchName("www.example.org"); !reflect.DeepEqual(e.Owners, []string{"o", ""}) {
		t.Errorf("merged owners %q", e.Owners)
	}
	// Merge leaves both operands alone, and nil is the empty policy.
	if file.Len() != 2 || flags.Len() != 3 {
		t.Error("Merge changed an operand")
	}
	var nilP *Policy
	if got := texts(nilP.Merge(flags).Entries()); !reflect.DeepEqual(got, texts(flags.Entries())) {
		t.Errorf("nil.Merge = %q", got)
	}
	if got := texts(flags.Merge(nil).Entries()); !reflect.DeepEqual(got, texts(flags.Entries())) {
		t.Errorf("Merge(nil) = %q", got)
	}
}

func TestWithout(t *testing.T) {
	p := mustParse(t, `{"allowed_hosts": [
		{"host": "only-a.example.com", "owner": "a"},
		{"host": "shared.example.com", "owner": "a", "allow_private": true},
		{"host": "shared.example.com", "owner": "b"},
		{"host": "mine.example.com", "owner": "a"},
		"mine.example.com",
		"plain.example.com",
		{"host": "203.0.113.0/24", "owner": "a"}
	]}`)
	q, kept := p.Without("a")
	if got := texts(q.Entries()); !reflect.DeepEqual(got, []string{"shared.example.com", "mine.example.com", "plain.example.com"}) {
		t.Errorf("after Without: %q", got)
	}
	wantKept := []Entry{
		{Kind: KindHost, Name: "shared.example.com", Owners: []string{"b"}}, // a's allow_private went with a
		{Kind: KindHost, Name: "mine.example.com"},                          // kept by the request without owner
	}
	if !reflect.DeepEqual(kept, wantKept) {
		t.Errorf("kept = %+v, want %+v", kept, wantKept)
	}
	if q.AllowsAddr(netip.MustParseAddr("203.0.113.1")) {
		t.Error("a's prefix survived")
	}
	if p.Len() != 5 {
		t.Error("Without changed the receiver")
	}
	// Removing an owner that owns nothing changes nothing.
	r, kept := p.Without("nobody")
	if kept != nil || !reflect.DeepEqual(r.Entries(), p.Entries()) {
		t.Errorf("Without(nobody) = %v, %v", r.Entries(), kept)
	}
	// The file written back keeps what is left, per owner.
	want := `{"allowed_hosts":[{"host":"shared.example.com","owner":"b"},"mine.example.com","plain.example.com"]}`
	if got, _ := q.MarshalJSON(); string(got) != want {
		t.Errorf("MarshalJSON = %s\nwant %s", got, want)
	}
}
