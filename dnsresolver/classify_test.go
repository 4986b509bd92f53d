package dnsresolver

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
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

func TestUpstreamAddr(t *testing.T) {
	tests := []struct {
		in, want string // want "" means an error
	}{
		{"198.51.100.53", "198.51.100.53:53"},
		{"198.51.100.53:5353", "198.51.100.53:5353"},
		{"127.0.0.1:53", "127.0.0.1:53"},
		{"2001:db8::53", "[2001:db8::53]:53"},
		{"[2001:db8::53]", "[2001:db8::53]:53"},
		{"[2001:db8::53]:5353", "[2001:db8::53]:5353"},
		{"::1", "[::1]:53"},
		{"[::1]:53", "[::1]:53"},
		{"fe80::1%eth0", "[fe80::1%eth0]:53"},
		{"[fe80::1%eth0]:53", "[fe80::1%eth0]:53"},
		{"::ffff:198.51.100.53", "[::ffff:198.51.100.53]:53"},
		{"", ""},
		{"dns.example.com", ""},
		{"dns.example.com:53", ""},
		{"198.51.100.53:", ""},
		{"198.51.100.53:65536", ""},
		{"198.51.100.53:-1", ""},
		{"198.51.100.53:domain", ""},
		{"198.51.100.53:0", ""},
		{"[::1]:0", ""},
		{"[198.51.100.53]:53", ""},
		{"2001:db8::53:5353:1:2:3:4:5", ""},
		{"198.51.100.300", ""},
		{" 198.51.100.53", ""},
		{"udp://198.51.100.53", ""},
	}
	for _, tt := range tests {
		got, err := UpstreamAddr(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("UpstreamAddr(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("UpstreamAddr(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	p := testPolicy(t)
	tests := []struct {
		name string
		cfg  Config
	}{
		{"bad upstream", Config{Policy: p, Upstreams: []string{"dns.example.com"}}},
		{"max below min", Config{Policy: p, Upstreams: []string{"127.0.0.1"}, MinTTL: time.Hour, MaxTTL: time.Minute}},
		{"negative grace", Config{Policy: p, Upstreams: []string{"127.0.0.1"}, Grace: -time.Second}},
	}
	for _, tt := range tests {
		if r, err := New(tt.cfg); err == nil {
			r.Close()
			t.Errorf("%s: New succeeded", tt.name)
		}
	}
	r, err := New(Config{Policy: p, Upstreams: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.cfg.MinTTL != DefaultMinTTL || r.cfg.MaxTTL != DefaultMaxTTL || r.cfg.MaxIPsPerName != DefaultMaxIPsPerName || r.cfg.Timeout != DefaultTimeout {
		t.Errorf("defaults not applied: %+v", r.cfg)
	}
}

func TestReverseAddr(t *testing.T) {
	tests := []struct {
		name string
		want string // "" means not a reverse name
	}{
		{"5.113.0.203.in-addr.arpa", "203.0.113.5"},
		{"5.113.0.203.in-addr.arpa.", "203.0.113.5"},
		{"1.0.0.127.in-addr.arpa", "127.0.0.1"},
		{"5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa", "2001:db8::5"},
		{"113.0.203.in-addr.arpa", ""},     // a /24 zone, not an address
		{"1.5.113.0.203.in-addr.arpa", ""}, // five labels
		{"05.113.0.203.in-addr.arpa", ""},  // leading zero
		{"256.113.0.203.in-addr.arpa", ""}, // out of range
		{"x.113.0.203.in-addr.arpa", ""},   // not a number
		{"in-addr.arpa", ""},               // the zone itself
		{"5.0.0.0.ip6.arpa", ""},           // too few nibbles
		{"g.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa", ""},
		{"50.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa", ""},
		{"api.example.com", ""},
	}
	for _, tt := range tests {
		a, ok := reverseAddr(tt.name)
		if tt.want == "" {
			if ok {
				t.Errorf("reverseAddr(%q) = %v, want not ok", tt.name, a)
			}
			continue
		}
		if !ok || a != netip.MustParseAddr(tt.want) {
			t.Errorf("reverseAddr(%q) = %v, %v; want %s", tt.name, a, ok, tt.want)
		}
	}
}

func TestEventString(t *testing.T) {
	tests := []struct {
		e    Event
		want []string
	}{
		{Event{Kind: EventRefused, Name: "evil.example.org", QType: "A", Reason: "not in the allowlist"}, []string{"refused", "evil.example.org", "A", "not in the allowlist"}},
		{Event{Kind: EventRefused, Audit: true, Name: "evil.example.org", QType: "A"}, []string{"audit: would refuse", "evil.example.org"}},
		{Event{Kind: EventRebinding, Name: "a.example.net", Addr: netip.MustParseAddr("10.0.0.5"), Reason: "private"}, []string{"dropped 10.0.0.5", "a.example.net", "allow_private"}},
		{Event{Kind: EventRebinding, Audit: true, Name: "a.example.net", Addr: netip.MustParseAddr("10.0.0.5")}, []string{"audit: would drop 10.0.0.5"}},
		{Event{Kind: EventCapReached, Name: "a.example.net", QType: "AAAA", Reason: "cap"}, []string{"SERVFAIL", "a.example.net", "AAAA", "cap"}},
		{Event{Kind: EventMapFull, Name: "a.example.net"}, []string{"SERVFAIL"}},
		{Event{Kind: EventUpstreamFailed, Name: "a.example.net"}, []string{"SERVFAIL"}},
		{Event{Kind: 99, Name: "a.example.net"}, []string{"99", "a.example.net"}},
	}
	for _, tt := range tests {
		s := tt.e.String()
		for _, w := range tt.want {
			if !strings.Contains(s, w) {
				t.Errorf("%+v.String() = %q, want it to contain %q", tt.e, s, w)
			}
		}
	}
}

func TestUpstreamAddrAmbiguous(t *testing.T) {
	// An IPv6 address without brackets is never read as address:port.
	for _, in := range []string{"::1:53", "2001:db8::53"} {
		got, err := UpstreamAddr(in)
		if err != nil {
			t.Fatalf("UpstreamAddr(%q): %v", in, err)
		}
		if !strings.HasSuffix(got, "]:53") || !strings.HasPrefix(got, "["+in) {
			t.Errorf("UpstreamAddr(%q) = %q, want [%s]:53", in, got, in)
		}
	}
}

// Without upstreams an allowed name gets SERVFAIL, not a panic.
func TestNoUpstream(t *testing.T) {
	ev := &eventLog{}
	r, err := New(Config{Policy: testPolicy(t), OnEvent: ev.add})
	if err != nil {
		t.Fatalf("New without upstreams: %v", err)
	}
	defer r.Close()
	resp := resolveDirect(r, query("api.example.com.", dns.TypeA))
	if resp.Rcode != dns.RcodeServerFailure {
		t.Errorf("rcode %s, want SERVFAIL", rcode(resp))
	}
	if len(ev.of(EventUpstreamFailed)) != 1 {
		t.Errorf("events %v, want one EventUpstreamFailed", ev.all())
	}
}
