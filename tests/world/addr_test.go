// SPDX-License-Identifier: Apache-2.0

package world

import (
	"net/netip"
	"testing"
)

// TestSafePrefix: a prefix is safe only when all of it lies in the test
// ranges; loopback prefixes are refused (nothing may be routed there).
func TestSafePrefix(t *testing.T) {
	for _, c := range []struct {
		p    string
		safe bool
	}{
		{"198.51.100.128/25", true},
		{"198.51.100.0/24", true},
		{"203.0.113.64/26", true},
		{"2001:db8:4::/64", true},
		{"198.51.100.0/23", false}, // reaches 198.51.101.0
		{"192.0.2.0/24", false},
		{"0.0.0.0/0", false},
		{"127.0.0.0/8", false},
		{"::1/128", false},
		{"2001:db8::/31", false},
	} {
		if got := SafePrefix(netip.MustParsePrefix(c.p)); got != c.safe {
			t.Errorf("SafePrefix(%s) = %v, want %v", c.p, got, c.safe)
		}
	}
	if SafePrefix(netip.Prefix{}) {
		t.Errorf("SafePrefix of the zero prefix is true")
	}
}
