// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"strings"
	"testing"
)

func TestVerifyParse(t *testing.T) {
	p, err := Parse([]byte(`{"allowed_hosts": [{"host": "github.com", "verify": "address"}, {"host": "*.example.com", "verify": "name"}, "pypi.org"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]Verify{"github.com": VerifyAddress, "a.example.com": VerifyName, "pypi.org": VerifyDefault} {
		e, ok := p.MatchName(name)
		if !ok || e.Verify != want {
			t.Errorf("%s: verify %q (matched %v), want %q", name, e.Verify, ok, want)
		}
	}
	if got := string(p.Format()); !strings.Contains(got, `"verify": "address"`) || !strings.Contains(got, `"verify": "name"`) {
		t.Errorf("Format drops verify:\n%s", got)
	}
	q, err := Parse(p.Format())
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := q.MatchName("github.com"); e.Verify != VerifyAddress {
		t.Errorf("round trip: %q", e.Verify)
	}
	for _, bad := range []string{
		`{"allowed_hosts": [{"host": "a.example", "verify": "sni"}]}`,
		`{"allowed_hosts": [{"host": "a.example", "verify": true}]}`,
		`{"allowed_hosts": [{"host": "203.0.113.0/24", "verify": "name"}]}`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestVerifyMergeStrictest(t *testing.T) {
	a, _ := Parse([]byte(`{"allowed_hosts": [{"host": "a.example", "verify": "address"}]}`))
	b, _ := Parse([]byte(`{"allowed_hosts": [{"host": "a.example", "verify": "name", "owner": "x"}]}`))
	if e, _ := a.Merge(b).MatchName("a.example"); e.Verify != VerifyName {
		t.Errorf("merged verify %q, want name", e.Verify)
	}
}

func TestVerifyNarrow(t *testing.T) {
	machine, _ := Parse([]byte(`{"allowed_hosts": ["a.example", {"host": "*.b.example", "verify": "name"}]}`))
	wide, _ := Parse([]byte(`{"allowed_hosts": [{"host": "a.example", "verify": "address"}]}`))
	if _, err := wide.Narrow(machine); err == nil || !strings.Contains(err.Error(), "verify") {
		t.Errorf("address over the default: %v", err)
	}
	wide2, _ := Parse([]byte(`{"allowed_hosts": ["*.b.example"]}`))
	if _, err := wide2.Narrow(machine); err == nil {
		t.Error("the default under a name wildcard: accepted")
	}
	narrow, _ := Parse([]byte(`{"allowed_hosts": [{"host": "a.example", "verify": "name"}, {"host": "x.b.example", "verify": "name"}]}`))
	if _, err := narrow.Narrow(machine); err != nil {
		t.Errorf("stricter: %v", err)
	}
}

func TestVerifyChecksTCP(t *testing.T) {
	for _, c := range []struct {
		v    Verify
		port uint16
		want bool
	}{
		{VerifyDefault, 443, true}, {VerifyDefault, 80, true}, {VerifyDefault, 22, true}, {VerifyDefault, 8443, true},
		{VerifyName, 22, true}, {VerifyName, 443, true},
		{VerifyAddress, 443, false}, {VerifyAddress, 80, false}, {VerifyAddress, 8443, false},
	} {
		if got := c.v.ChecksTCP(c.port); got != c.want {
			t.Errorf("Verify(%q).ChecksTCP(%d) = %v, want %v", c.v, c.port, got, c.want)
		}
	}
}

func TestVerifyStrict(t *testing.T) {
	for _, c := range []struct {
		v    Verify
		port uint16
		want bool
	}{
		{VerifyDefault, 443, true}, {VerifyDefault, 80, true}, {VerifyDefault, 22, false}, {VerifyDefault, 8443, false},
		{VerifyName, 22, true}, {VerifyName, 8443, true},
		{VerifyAddress, 443, false}, {VerifyAddress, 22, false},
	} {
		if got := c.v.Strict(c.port); got != c.want {
			t.Errorf("Verify(%q).Strict(%d) = %v, want %v", c.v, c.port, got, c.want)
		}
	}
}
