// SPDX-License-Identifier: Apache-2.0

package addrclass

import (
	"net/netip"
	"strings"
	"testing"
)

func TestRebinding(t *testing.T) {
	tests := []struct {
		addr string
		bad  bool
		why  string // substring of the reason, when bad
	}{
		// Rebinding targets.
		{"127.0.0.1", true, "loopback"},
		{"127.255.1.2", true, "loopback"},
		{"10.0.0.5", true, "RFC 1918"},
		{"172.16.0.1", true, "RFC 1918"},
		{"172.31.255.254", true, "RFC 1918"},
		{"192.168.1.1", true, "RFC 1918"},
		{"169.254.169.254", true, "metadata"},
		{"100.64.1.1", true, "carrier-grade"},
		{"0.0.0.0", true, "unspecified"},
		{"0.1.2.3", true, "this network"},
		{"192.0.0.8", true, "IETF"},
		{"198.18.0.1", true, "benchmarking"},
		{"224.0.0.251", true, "multicast"},
		{"239.1.1.1", true, "multicast"},
		{"240.0.0.1", true, "reserved"},
		{"255.255.255.255", true, "broadcast"},
		{"::", true, "unspecified"},
		{"::1", true, "loopback"},
		{"fd00::1", true, "ULA"},
		{"fc00::1", true, "ULA"},
		{"fe80::1", true, "link-local"},
		{"fe80::1%eth0", true, "link-local"},
		{"fec0::1", true, "site-local"},
		{"ff02::1", true, "multicast"},
		{"100::1", true, "discard"},
		// Embedded IPv4 is judged by the IPv4 address.
		{"::ffff:127.0.0.1", true, "loopback"},
		{"::ffff:10.0.0.5", true, "RFC 1918"},
		{"::ffff:169.254.169.254", true, "metadata"},
		{"64:ff9b::7f00:1", true, "loopback"},     // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", true, "metadata"},  // NAT64 of 169.254.169.254
		{"2002:7f00:1::1", true, "loopback"},      // 6to4 of 127.0.0.1
		{"2002:a00:5::", true, "RFC 1918"},        // 6to4 of 10.0.0.5
		{"::7f00:1", true, "IPv4-compatible"},     // deprecated ::127.0.0.1
		{"::cb00:7105", true, "IPv4-compatible"},  // even of a public address
		{"", true, "invalid"},                     // the zero Addr
		{"100.63.255.255", false, ""},             // just below CGNAT
		{"100.128.0.0", false, ""},                // just above CGNAT
		{"172.32.0.1", false, ""},                 // just above 172.16/12
		{"203.0.113.5", false, ""},                // documentation: public data
		{"198.51.100.7", false, ""},               // documentation
		{"198.51.100.1", false, ""},               // documentation (not 192.0.0/24)
		{"2001:db8::1", false, ""},                // documentation
		{"2001:db8:ffff::53", false, ""},          // documentation
		{"::ffff:203.0.113.5", false, ""},         // mapped public
		{"64:ff9b::cb00:7105", false, ""},         // NAT64 of 203.0.113.5
		{"2002:cb00:7105::1", false, ""},          // 6to4 of 203.0.113.5
		{"2001:db8::a9fe:a9fe", false, ""},        // not an embedding prefix
		{"febf:ffff::1", true, "link-local"},      // top of fe80::/10
		{"2001:db8:0:0:0:ffff:7f00:1", false, ""}, // looks mapped, is not
		{"203.0.113.255", false, ""},
		{"::ffff:203.0.113.255", false, ""},
		{"0:0:0:0:0:ffff:cb00:7105", false, ""},    // mapped, spelled out
		{"0:0:0:0:0:ffff:0a00:0005", true, "1918"}, // mapped 10.0.0.5 spelled out
		{"::ffff:0.0.0.0", true, "unspecified"},    // mapped unspecified
		{"64:ff9b::", true, "unspecified"},         // NAT64 of 0.0.0.0
		{"2002::", true, "unspecified"},            // 6to4 of 0.0.0.0
		{"::2", true, "IPv4-compatible"},           // in ::/96
		{"1::", false, ""},                         // not ::/96
		{"2001:db8::ffff:7f00:1", false, ""},       // 2001:db8 is documentation
		{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true, "ULA"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			var a netip.Addr
			if tt.addr != "" {
				a = netip.MustParseAddr(tt.addr)
			}
			why, bad := Rebinding(a)
			if bad != tt.bad {
				t.Fatalf("Rebinding(%v) = %q, %v; want bad=%v", a, why, bad, tt.bad)
			}
			if bad && !strings.Contains(why, tt.why) {
				t.Errorf("Rebinding(%v) reason %q, want it to mention %q", a, why, tt.why)
			}
			if !bad && why != "" {
				t.Errorf("Rebinding(%v) gave a reason %q for a good address", a, why)
			}
		})
	}
}

func TestClassifyKinds(t *testing.T) {
	tests := []struct {
		addr string
		kind Kind
	}{
		{"203.0.113.5", Public},
		{"2001:db8::1", Public},
		{"8.8.8.8", Public},
		{"0.0.0.0", Unspecified},
		{"::", Unspecified},
		{"127.0.0.1", Loopback},
		{"::1", Loopback},
		{"::ffff:127.0.0.1", Loopback},
		{"10.1.2.3", Private},
		{"100.64.0.1", Private},
		{"fd12::1", Private},
		{"169.254.1.1", LinkLocal},
		{"fe80::1%eth0", LinkLocal},
		{"169.254.169.254", Metadata},
		{"::ffff:169.254.169.254", Metadata},
		{"64:ff9b::a9fe:a9fe", Metadata},
		{"169.254.170.2", Metadata},
		{"fd00:ec2::254", Metadata},
		{"fd00:ec2::253", Private},
		{"224.0.0.1", Multicast},
		{"ff02::1", Multicast},
		{"240.0.0.1", Reserved},
		{"::7f00:1", Reserved},
		{"fec0::1", Reserved},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		k, why := Classify(a)
		if k != tt.kind {
			t.Errorf("Classify(%v) = %v (%q), want %v", a, k, why, tt.kind)
		}
		if (k == Public) != (why == "") {
			t.Errorf("Classify(%v) = %v with reason %q: a reason goes with every kind but Public", a, k, why)
		}
	}
	if k, _ := Classify(netip.Addr{}); k != Invalid {
		t.Errorf("Classify(zero) = %v, want invalid", k)
	}
}

func TestKindString(t *testing.T) {
	for k := Public; k <= Reserved; k++ {
		if s := k.String(); s == "" || s == "unknown" {
			t.Errorf("Kind(%d) has no name", k)
		}
	}
	if s := Kind(200).String(); s != "unknown" {
		t.Errorf("Kind(200) = %q", s)
	}
}

// BenchmarkRebindingPublic is the resolver's fast path: every address of a
// forwarded answer, nearly always a public one.
func BenchmarkRebindingPublic(b *testing.B) {
	a := netip.MustParseAddr("203.0.113.5")
	for b.Loop() {
		if _, bad := Rebinding(a); bad {
			b.Fatal("public address refused")
		}
	}
}

func TestRefusedError(t *testing.T) {
	e := &RefusedError{Name: "intranet.example", Refused: []Refusal{
		{netip.MustParseAddr("10.0.0.5"), "private (RFC 1918)"},
		{netip.MustParseAddr("::1"), "loopback"},
	}}
	want := "intranet.example resolves only to addresses sluice refuses: 10.0.0.5 (private (RFC 1918)), ::1 (loopback) (DNS rebinding protection; add allow_private to the entry if this is intended)"
	if got := e.Error(); got != want {
		t.Errorf("Error() = %q\nwant      %q", got, want)
	}
}
