// SPDX-License-Identifier: Apache-2.0

package namecheck

import (
	"strings"
	"testing"
)

// TestExplainNeverContradicts: a refusal of a name never says the
// address was allowed for that very name (issue 30: a once approval's
// name refused by a check that never heard of it read "(HTTP Host
// once.allowed.test): the address was allowed for once.allowed.test").
func TestExplainNeverContradicts(t *testing.T) {
	ech := "the ClientHello carries an Encrypted ClientHello, whose inner SNI sluice cannot read"
	cases := []struct {
		why, name  string
		allowedFor []string
		want       string
	}{
		{NameNotAllowed, "evil.test", []string{"cdn.test"}, "the address was allowed for cdn.test"},
		{NameNotAllowed, "evil.test", []string{"cdn.test", "cdn2.test"}, "the address was allowed for cdn.test, cdn2.test"},
		{NameNotAllowed, "evil.test", nil, NameNotAllowed},
		{NameNotAllowed, "once.allowed.test", []string{"once.allowed.test"},
			"once.allowed.test is not allowed now (the address was learned for it while it was)"},
		{NameNotAllowed, "Once.Allowed.Test", []string{"once.allowed.test."},
			"Once.Allowed.Test is not allowed now (the address was learned for it while it was)"},
		{NameNotAllowed, "once.allowed.test", []string{"cdn.test", "once.allowed.test"},
			"once.allowed.test is not allowed now (the address was learned for it while it was); the address was also allowed for cdn.test"},
		{ech, "cdn.test", []string{"cdn.test"}, ech + "; the address was learned for cdn.test"},
		{ech, "cdn.test", []string{"other.test"}, ech + "; the address was allowed for other.test"},
		{"the request names no host", "", []string{"cdn.test"}, "the request names no host; the address was allowed for cdn.test"},
	}
	for _, c := range cases {
		got := Explain(c.why, c.name, c.allowedFor)
		if got != c.want {
			t.Errorf("Explain(%q, %q, %q) = %q, want %q", c.why, c.name, c.allowedFor, got, c.want)
		}
		if c.name != "" && strings.Contains(strings.ToLower(got), "allowed for "+strings.ToLower(c.name)) {
			t.Errorf("Explain(%q, %q, %q) = %q says the address was allowed for the refused name", c.why, c.name, c.allowedFor, got)
		}
	}
}
