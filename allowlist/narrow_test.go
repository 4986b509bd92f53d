// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestNarrow(t *testing.T) {
	machine := mustParse(t, `{"allowed_hosts": [
		"api.example.com",
		"*.example.org",
		{"host": "*.lab.example.org", "allow_private": true},
		"*.dev.lab.example.org",
		{"host": "db.example.net", "allow_private": true},
		"203.0.113.0/25",
		"203.0.113.128/25",
		"198.51.100.0/24",
		"2001:db8::/48"
	]}`)
	tests := []struct {
		session string // one entry, as JSON
		reason  string // "" when covered
	}{
		{`"api.example.com"`, ""},
		{`"API.example.com."`, ""},
		{`"www.example.org"`, ""},
		{`"a.b.example.org"`, ""},
		{`"*.example.org"`, ""},
		{`"*.sub.example.org"`, ""},
		{`"203.0.113.5"`, ""},
		{`"203.0.113.0/24"`, ""}, // covered by the union of two halves
		{`"198.51.100.64/26"`, ""},
		{`"2001:db8::/64"`, ""},
		{`"127.0.0.1"`, ""}, // loopback is always allowed
		{`"127.0.0.0/8"`, ""},
		{`"::1"`, ""},
		{`{"host": "db.example.net", "allow_private": true}`, ""},
		{`{"host": "x.lab.example.org", "allow_private": true}`, ""},
		{`{"host": "*.x.lab.example.org", "allow_private": true}`, ""},
		{`{"host": "api.example.com", "owner": "someone"}`, ""},

		{`"other.example.com"`, "does not allow this host"},
		{`"example.org"`, "does not allow this host"}, // the apex is not under the wildcard
		{`"*.example.com"`, "no machine wildcard covers it"},
		{`"*.api.example.com"`, "no machine wildcard covers it"},
		{`"*.org.example"`, "no machine wildcard covers it"},
		{`"203.0.112.0/23"`, "no machine prefix contains it"},
		{`"198.51.100.0/23"`, "no machine prefix contains it"},
		{`"2001:db8::/32"`, "no machine prefix contains it"},
		{`"128.0.0.1"`, "no machine prefix contains it"},
		{`{"host": "api.example.com", "allow_private": true}`, "machine entry api.example.com does not allow private"},
		{`{"host": "x.example.org", "allow_private": true}`, "machine entry *.example.org does not allow private"},
		{`{"host": "x.dev.lab.example.org", "allow_private": true}`, "machine entry *.dev.lab.example.org does not allow private"},
		{`{"host": "*.example.org", "allow_private": true}`, "machine entry *.example.org does not allow private"},
		{`{"host": "*.lab.example.org", "allow_private": true}`, "machine entry *.dev.lab.example.org below it does not allow private"},
	}
	for _, tt := range tests {
		t.Run(tt.session, func(t *testing.T) {
			session := mustParse(t, `{"allowed_hosts": [`+tt.session+`]}`)
			got, err := session.Narrow(machine)
			if tt.reason == "" {
				if err != nil || got != session {
					t.Errorf("Narrow = %v, %v; want the session policy", got, err)
				}
				return
			}
			var ne *NarrowError
			if got != nil || !errors.As(err, &ne) || len(ne.Exceeding) != 1 {
				t.Fatalf("Narrow = %v, %v; want a *NarrowError", got, err)
			}
			if !strings.Contains(ne.Exceeding[0].Reason, tt.reason) {
				t.Errorf("reason %q does not contain %q", ne.Exceeding[0].Reason, tt.reason)
			}
		})
	}
}

func TestNarrowNamesEveryExceedingEntry(t *testing.T) {
	machine := mustStrings(t, "api.example.com", "203.0.113.0/24")
	session := mustStrings(t, "api.example.com", "evil.example.com", "203.0.113.9", "198.51.100.1", "*.example.com")
	_, err := session.Narrow(machine)
	var ne *NarrowError
	if !errors.As(err, &ne) {
		t.Fatalf("error %v", err)
	}
	if got := texts(exceedingEntries(ne)); strings.Join(got, " ") != "evil.example.com 198.51.100.1 *.example.com" {
		t.Errorf("exceeding %q", got)
	}
	for _, want := range []string{"evil.example.com:", "198.51.100.1:", "*.example.com:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func exceedingEntries(ne *NarrowError) []Entry {
	var out []Entry
	for _, x := range ne.Exceeding {
		out = append(out, x.Entry)
	}
	return out
}

func TestNarrowNil(t *testing.T) {
	var nilP *Policy
	if p, err := nilP.Narrow(nil); err != nil || p.Len() != 0 {
		t.Errorf("nil.Narrow(nil) = %v, %v", p, err)
	}
	if _, err := mustStrings(t, "api.example.com").Narrow(nil); err == nil {
		t.Error("a name was covered by the nil machine policy")
	}
	if p, err := mustStrings(t, "127.0.0.1").Narrow(nil); err != nil || p.Len() != 1 {
		t.Errorf("loopback against nil machine: %v, %v", p, err)
	}
}

func TestCoveredBy(t *testing.T) {
	ms := []netip.Prefix{mustPrefix("203.0.113.0/26"), mustPrefix("203.0.113.64/26"), mustPrefix("203.0.113.128/25"), mustPrefix("2001:db8::/33")}
	for p, want := range map[string]bool{
		"203.0.113.0/24":     true,
		"203.0.113.0/25":     true,
		"203.0.112.0/23":     false,
		"203.0.113.200/32":   true,
		"2001:db8::/33":      true,
		"2001:db8::/32":      false,
		"2001:db8:8000::/33": false,
		"0.0.0.0/0":          false,
	} {
		if got := coveredBy(mustPrefix(p), ms); got != want {
			t.Errorf("coveredBy(%s) = %v, want %v", p, got, want)
		}
	}
}
