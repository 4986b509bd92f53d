// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseAuthority(t *testing.T) {
	for _, tc := range []struct {
		in          string
		defaultPort uint16
		host        string
		port        uint16
		ip          bool
		err         string // substring; "" means valid
	}{
		{in: "example.com:443", host: "example.com", port: 443},
		{in: "Example.COM.:8443", host: "Example.COM.", port: 8443},
		{in: "203.0.113.10:443", host: "203.0.113.10", port: 443, ip: true},
		{in: "[2001:db8::1]:443", host: "2001:db8::1", port: 443, ip: true},
		{in: "[::ffff:127.0.0.1]:22", host: "::ffff:127.0.0.1", port: 22, ip: true},
		{in: "bücher.example:443", host: "bücher.example", port: 443},
		{in: "example.com", defaultPort: 80, host: "example.com", port: 80},
		{in: "[2001:db8::1]", defaultPort: 80, host: "2001:db8::1", port: 80, ip: true},
		{in: "127.1:80", host: "127.1", port: 80}, // a name (refused by the policy), not an address

		{in: "example.com", err: "no port"},
		{in: "example.com:", err: "empty port"},
		{in: "example.com:0", err: "out of range"},
		{in: "example.com:65536", err: "out of range"},
		{in: "example.com:+80", err: "invalid port"},
		{in: "example.com:0x50", err: "invalid port"},
		{in: "example.com:443:443", err: "brackets"},
		{in: "2001:db8::1:443", err: "brackets"},
		{in: "[2001:db8::1]443", err: "after ']'"},
		{in: "[2001:db8::1", err: "missing ']'"},
		{in: "[203.0.113.10]:443", err: "not an IPv6 address"},
		{in: "[fe80::1%25eth0]:443", err: "contains '%'"},
		{in: "allowed.example@evil.example:443", err: "userinfo"},
		{in: "user:pass@evil.example:443", err: "userinfo"},
		{in: "evil.example:443/path", err: "contains '/'"},
		{in: "evil.example:443?x", err: "contains '?'"},
		{in: "evil.example:443#x", err: "contains '#'"},
		{in: `evil.example\@x:443`, err: "userinfo"},
		{in: `evil.example\x:443`, err: `contains '\\'`},
		{in: "evil example:443", err: "contains ' '"},
		{in: "evil\x00.example:443", err: "contains"},
		{in: ":443", err: "no host"},
		{in: "", err: "empty"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseAuthority(tc.in, tc.defaultPort)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseAuthority(%q) = %+v, %v; want error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseAuthority(%q): %v", tc.in, err)
			}
			if got.host != tc.host || got.port != tc.port || got.addr.IsValid() != tc.ip {
				t.Errorf("parseAuthority(%q) = %+v, want host %q port %d ip %v", tc.in, got, tc.host, tc.port, tc.ip)
			}
		})
	}
}

func TestNewTarget(t *testing.T) {
	for _, tc := range []struct {
		host string
		ip   string
		err  bool
	}{
		{host: "example.com"},
		{host: "203.0.113.10", ip: "203.0.113.10"},
		{host: "2001:db8::1", ip: "2001:db8::1"},
		{host: "::ffff:203.0.113.10", ip: "::ffff:203.0.113.10"},
		{host: "127.1"},      // left to NormalizeName, which refuses it
		{host: "0x7f000001"}, // likewise
		{host: "010.0.0.1"},  // netip refuses leading zeros; a name then
		{host: "fe80::1%eth0", err: true},
		{host: "not:an:address", err: true},
		{host: "", err: true},
	} {
		got, err := newTarget(tc.host, 443)
		if tc.err {
			if err == nil {
				t.Errorf("newTarget(%q) = %+v, want an error", tc.host, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("newTarget(%q): %v", tc.host, err)
			continue
		}
		want := netip.Addr{}
		if tc.ip != "" {
			want = netip.MustParseAddr(tc.ip)
		}
		if got.addr != want {
			t.Errorf("newTarget(%q).addr = %v, want %v", tc.host, got.addr, want)
		}
	}
	if _, err := newTarget("example.com", 0); err == nil {
		t.Error("port 0 accepted")
	}
}

func TestSameAuthority(t *testing.T) {
	target := func(s string) target {
		t.Helper()
		tg, err := parseAuthority(s, 80)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	for _, tc := range []struct {
		header, target string
		defaultPort    uint16
		want           bool
	}{
		{"example.com:443", "example.com:443", 0, true},
		{"EXAMPLE.com.:443", "example.com:443", 0, true},
		{"example.com", "example.com:443", 0, true}, // CONNECT: host only
		{"xn--bcher-kva.example:443", "bücher.example:443", 0, true},
		{"[2001:db8::1]:443", "[2001:db8:0::1]:443", 0, true},
		{"example.com", "example.com:80", 80, true},
		{"example.com:80", "example.com", 80, true},
		{"example.com", "example.com:8080", 80, false}, // absolute form: Host without port is :80
		{"example.com:444", "example.com:443", 0, false},
		{"evil.example:443", "example.com:443", 0, false},
		{"203.0.113.20:443", "203.0.113.10:443", 0, false},
		{"203.0.113.10:443", "a.example:443", 0, false},
		{"user@example.com:443", "example.com:443", 0, false},
		{"", "example.com:443", 0, false},
	} {
		if got := sameAuthority(tc.header, target(tc.target), tc.defaultPort); got != tc.want {
			t.Errorf("sameAuthority(%q, %q, %d) = %v, want %v", tc.header, tc.target, tc.defaultPort, got, tc.want)
		}
	}
}
