// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"net/netip"
	"testing"
)

func TestNormalizeName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"example.com", "example.com"},
		{"EXAMPLE.com.", "example.com"},
		{"bücher.example", "xn--bcher-kva.example"},
		{"Bücher.Example.", "xn--bcher-kva.example"},
		{"XN--BCHER-KVA.example", "xn--bcher-kva.example"},
		{"straße.example", "xn--strae-oqa.example"}, // non-transitional: ß is kept
		{"ｅｘａｍｐｌｅ．com", "example.com"},              // full-width letters and full stop
		{"www。example。test", "www.example.test"},
		{"_443._tcp.example.com", "_443._tcp.example.com"},
		{"single", "single"},
	}
	for _, tt := range tests {
		got, err := NormalizeName(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("NormalizeName(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		// Normalizing is idempotent.
		if again, err := NormalizeName(got); err != nil || again != got {
			t.Errorf("NormalizeName(%q) = %q, %v; want it unchanged", got, again, err)
		}
	}
	for _, bad := range []string{"", ".", "a..b", "example.com..", "a b.example", "*.example.com", "203.0.113.5", "exa_mple.123"} {
		if got, err := NormalizeName(bad); err == nil {
			t.Errorf("NormalizeName(%q) = %q, want an error", bad, got)
		}
	}
}

func TestIsLoopbackName(t *testing.T) {
	for name, want := range map[string]bool{
		"localhost":           true,
		"LOCALHOST.":          true,
		"app.localhost":       true,
		"a.b.localhost":       true,
		"localhost.test":      false,
		"notlocalhost":        false,
		"localhost.localhost": true,
		"":                    false,
	} {
		if got := IsLoopbackName(name); got != want {
			t.Errorf("IsLoopbackName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1":          true,
		"127.255.255.254":    true,
		"::1":                true,
		"::ffff:127.0.0.1":   true,
		"::ffff:127.1.2.3":   true,
		"128.0.0.1":          false,
		"203.0.113.5":        false,
		"::2":                false,
		"::ffff:203.0.113.5": false,
		"2001:db8::1":        false,
	} {
		if got := IsLoopback(netip.MustParseAddr(addr)); got != want {
			t.Errorf("IsLoopback(%s) = %v, want %v", addr, got, want)
		}
	}
	if IsLoopback(netip.Addr{}) {
		t.Error("IsLoopback(invalid) = true")
	}
}
