// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestParseEntryValid(t *testing.T) {
	tests := []struct {
		in     string
		kind   Kind
		name   string
		prefix string
		text   string // canonical String()
	}{
		{in: "api.example.com", kind: KindHost, name: "api.example.com", text: "api.example.com"},
		{in: "API.Example.COM", kind: KindHost, name: "api.example.com", text: "api.example.com"},
		{in: "api.example.com.", kind: KindHost, name: "api.example.com", text: "api.example.com"},
		{in: "bücher.example", kind: KindHost, name: "xn--bcher-kva.example", text: "xn--bcher-kva.example"},
		{in: "BÜCHER.example.", kind: KindHost, name: "xn--bcher-kva.example", text: "xn--bcher-kva.example"},
		{in: "xn--bcher-kva.example", kind: KindHost, name: "xn--bcher-kva.example", text: "xn--bcher-kva.example"},
		{in: "ＡＰＩ.example.com", kind: KindHost, name: "api.example.com", text: "api.example.com"},
		{in: "api。example。com", kind: KindHost, name: "api.example.com", text: "api.example.com"},
		{in: "_acme.example.com", kind: KindHost, name: "_acme.example.com", text: "_acme.example.com"},
		{in: "r3---sn-abc.example.net", kind: KindHost, name: "r3---sn-abc.example.net", text: "r3---sn-abc.example.net"},
		{in: "1.2.example.test", kind: KindHost, name: "1.2.example.test", text: "1.2.example.test"},
		{in: "localhost", kind: KindHost, name: "localhost", text: "localhost"},
		{in: "*.example.com", kind: KindWildcard, name: "example.com", text: "*.example.com"},
		{in: "*.Example.COM.", kind: KindWildcard, name: "example.com", text: "*.example.com"},
		{in: "*.githubusercontent.com", kind: KindWildcard, name: "githubusercontent.com", text: "*.githubusercontent.com"},
		{in: "*.bücher.example", kind: KindWildcard, name: "xn--bcher-kva.example", text: "*.xn--bcher-kva.example"},
		{in: "203.0.113.5", kind: KindPrefix, prefix: "203.0.113.5/32", text: "203.0.113.5"},
		{in: "2001:db8::1", kind: KindPrefix, prefix: "2001:db8::1/128", text: "2001:db8::1"},
		{in: "2001:DB8::1", kind: KindPrefix, prefix: "2001:db8::1/128", text: "2001:db8::1"},
		{in: "[2001:db8::1]", kind: KindPrefix, prefix: "2001:db8::1/128", text: "2001:db8::1"},
		{in: "::ffff:203.0.113.5", kind: KindPrefix, prefix: "203.0.113.5/32", text: "203.0.113.5"},
		{in: "203.0.113.0/24", kind: KindPrefix, prefix: "203.0.113.0/24", text: "203.0.113.0/24"},
		{in: "203.0.113.7/24", kind: KindPrefix, prefix: "203.0.113.0/24", text: "203.0.113.0/24"},
		{in: "203.0.113.7/32", kind: KindPrefix, prefix: "203.0.113.7/32", text: "203.0.113.7"},
		{in: "2001:db8::/32", kind: KindPrefix, prefix: "2001:db8::/32", text: "2001:db8::/32"},
		{in: "2001:db8:ffff::/32", kind: KindPrefix, prefix: "2001:db8::/32", text: "2001:db8::/32"},
		{in: "::ffff:203.0.113.0/120", kind: KindPrefix, prefix: "203.0.113.0/24", text: "203.0.113.0/24"},
		{in: "::ffff:198.51.100.9/128", kind: KindPrefix, prefix: "198.51.100.9/32", text: "198.51.100.9"},
		{in: "::ffff:0:0/95", kind: KindPrefix, prefix: "::fffe:0:0/95", text: "::fffe:0:0/95"},
		{in: "0.0.0.0/0", kind: KindPrefix, prefix: "0.0.0.0/0", text: "0.0.0.0/0"},
		{in: "127.0.0.1", kind: KindPrefix, prefix: "127.0.0.1/32", text: "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			e, err := ParseEntry(tt.in)
			if err != nil {
				t.Fatalf("ParseEntry(%q): %v", tt.in, err)
			}
			if e.Kind != tt.kind || e.Name != tt.name {
				t.Errorf("got kind %v name %q, want %v %q", e.Kind, e.Name, tt.kind, tt.name)
			}
			if tt.prefix != "" {
				if want := netip.MustParsePrefix(tt.prefix); e.Prefix != want {
					t.Errorf("prefix %v, want %v", e.Prefix, want)
				}
			} else if e.Prefix.IsValid() {
				t.Errorf("name entry has prefix %v", e.Prefix)
			}
			if got := e.String(); got != tt.text {
				t.Errorf("String() = %q, want %q", got, tt.text)
			}
			if e.AllowPrivate || e.Owners != nil {
				t.Errorf("ParseEntry set options: %+v", e)
			}
			// The canonical text is a fixed point.
			e2, err := ParseEntry(e.String())
			if err != nil || e2.String() != e.String() || e2.Kind != e.Kind {
				t.Errorf("re-parsing %q: %+v, %v", e.String(), e2, err)
			}
		})
	}
}

func TestParseEntryInvalid(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		in   string
		want string // substring of the error
	}{
		{"", "empty entry"},
		{"*", `lone "*"`},
		{"*.com", "too broad"},
		{"*.com.", "too broad"},
		{"*.", `nothing after "*."`},
		{"*.*.example.com", "whole leftmost label"},
		{"*foo.example.com", "whole leftmost label"},
		{"foo*.example.com", "whole leftmost label"},
		{"a.*.example.com", "whole leftmost label"},
		{"**.example.com", "whole leftmost label"},
		{"https://api.example.com/v1", `give the host name "api.example.com", not a URL`},
		{"HTTPS://API.example.com", `give the host name "api.example.com", not a URL`},
		{"https://[2001:db8::1]:443/", `give the host name "2001:db8::1", not a URL`},
		{"https://", "looks like a URL"},
		{"api.example.com/v1", `give the host name "api.example.com" without a path`},
		{"api.example.com:443/v1", `give the host name "api.example.com" without a path`},
		{"api.example.com:443", `a port is not part of the host: give "api.example.com"`},
		{"203.0.113.5:443", `a port is not part of the host: give "203.0.113.5"`},
		{"[2001:db8::1]:443", `a port is not part of the host: give "2001:db8::1"`},
		{"*.example.com:8080", `give "*.example.com"`},
		{"api.example.com:", "a port is not part of the host"},
		{"[2001:db8::]/32", "without brackets"},
		{"[2001:db8::1", `missing "]"`},
		{"[example.com]", "invalid address in brackets"},
		{"300.1.1.1", "invalid IPv4 address"},
		{"203.0.113", "invalid IPv4 address"},
		{"203.000.113.5", "invalid IPv4 address"},
		{"2001:db8::g", "invalid IPv6 address"},
		{"fe80::1%eth0", "zones"},
		{"fe80::1%eth0/64", "zones"},
		{"0.0.0.0", "unspecified address"},
		{"::", "unspecified address"},
		{"203.0.113.0/33", "out of range"},
		{"2001:db8::/129", "out of range"},
		{"203.0.113.0/", "missing prefix length"},
		{"203.0.113.0/024", "leading zeros"},
		{"203.0.113.0/+8", "decimal number"},
		{"300.0.113.0/24", "invalid address in CIDR"},
		{"api example.com", "white space"},
		{" api.example.com", "white space"},
		{"api.example.com\n", "white space"},
		{"api\x00.example.com", "control character"},
		{"api.exa\xffmple.com", "UTF-8"},
		{"api!.example.com", `invalid character '!'`},
		{"api@example.com", `invalid character '@'`},
		{"-api.example.com", "starts or ends with '-'"},
		{"api-.example.com", "starts or ends with '-'"},
		{"api..example.com", "empty label"},
		{"api.example.com..", "empty label"},
		{".", "empty host name"},
		{".example.com", "write *.example.com for the names under example.com, and example.com for example.com itself"},
		{long + ".example.com", "at most 63"},
		{strings.Repeat("a.", 127) + "ab", "at most 253"},
		{"xn--a.example.com", "not valid punycode"},
		{"xn--.example.com", "starts or ends with '-'"},
		{"xn--ab.example.com", "not valid punycode"},
		{"example.123", "numeric"},
		{"127.1", "invalid IPv4 address"},
		{"0x7f000001", "numeric"},
		{"a.b.0xcb", "numeric"},
		{"＊.example.com", "IDNA"},
		{"a\u200db.example.com", "IDNA"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			e, err := ParseEntry(tt.in)
			if err == nil {
				t.Fatalf("ParseEntry(%q) = %+v, want an error containing %q", tt.in, e, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseEntry(%q) error %q does not contain %q", tt.in, err, tt.want)
			}
			if q := quote(tt.in); !strings.Contains(err.Error(), q) {
				t.Errorf("error %q does not name the entry %s", err, q)
			}
		})
	}
}

// quote formats s the way the errors do.
func quote(s string) string { return fmt.Sprintf("%q", s) }

func TestMaxLengthName(t *testing.T) {
	// 253 characters is the limit, inclusive.
	name := strings.Repeat("a.", 125) + "abc"
	if len(name) != 253 {
		t.Fatalf("test name has %d characters", len(name))
	}
	if _, err := ParseEntry(name); err != nil {
		t.Errorf("253 characters: %v", err)
	}
	if _, err := ParseEntry(name + "."); err != nil {
		t.Errorf("253 characters and a trailing dot: %v", err)
	}
	if _, err := ParseEntry(strings.Repeat("a", 63) + ".example"); err != nil {
		t.Errorf("63-character label: %v", err)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindHost: "host", KindWildcard: "wildcard", KindPrefix: "prefix", 0: "Kind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
	if got := (Entry{}).String(); !strings.Contains(got, "invalid") {
		t.Errorf("zero Entry String() = %q", got)
	}
}
