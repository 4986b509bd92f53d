// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

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
