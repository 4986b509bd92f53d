// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/allowlist"
)

func TestStatsAndObserveUpstream(t *testing.T) {
	var observed atomic.Int64
	e := newEnv(t, apiZone, nil, func(c *Config) {
		c.ObserveUpstream = func(time.Duration) { observed.Add(1) }
	})
	e.ask(t, "api.example.com.", dns.TypeA)            // forwarded
	e.ask(t, "api.example.com.", dns.TypeA)            // cached
	e.ask(t, "evil.example.org.", dns.TypeA)           // refused
	e.ask(t, "localhost.", dns.TypeA)                  // local
	e.ask(t, "5.113.0.203.in-addr.arpa.", dns.TypePTR) // local (learned above)
	st := e.r.Stats()
	got := []uint64{st.Forwarded.Load(), st.Cached.Load(), st.Refused.Load(), st.Local.Load(), st.Servfail.Load()}
	if want := []uint64{1, 1, 1, 2, 0}; !slices.Equal(got, want) {
		t.Errorf("forwarded, cached, refused, local, servfail = %v, want %v", got, want)
	}
	if n := observed.Load(); n != 1 {
		t.Errorf("ObserveUpstream called %d times, want 1", n)
	}
}

func TestLearnedFromAndPrune(t *testing.T) {
	z := zone{
		"a.example.net. A":   {"a.example.net. 300 IN A 203.0.113.31"},
		"api.example.com. A": {"api.example.com. 300 IN A 203.0.113.32"},
		"b.example.net. A":   {"b.example.net. 300 IN A 203.0.113.32"},
	}
	e := newEnv(t, z, nil)
	for _, n := range []string{"a.example.net.", "api.example.com.", "b.example.net."} {
		e.ask(t, n, dns.TypeA)
	}
	names := e.r.LearnedFrom(mustAddr("::ffff:203.0.113.32"))
	slices.Sort(names)
	if !slices.Equal(names, []string{"api.example.com", "b.example.net"}) {
		t.Errorf("LearnedFrom = %v", names)
	}
	if names := e.r.LearnedFrom(mustAddr("203.0.113.99")); names != nil {
		t.Errorf("LearnedFrom of an unknown address = %v", names)
	}

	p, err := allowlist.FromStrings([]string{"api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	e.r.SetPolicy(p)
	e.r.Prune()
	// .31 was only a.example.net's: forgotten. .32 is still api.example.com's.
	if got := e.learner.forgotten(); !slices.Equal(got, []netip.Addr{mustAddr("203.0.113.31")}) {
		t.Errorf("Prune forgot %v, want only 203.0.113.31", got)
	}
	if names := e.r.LearnedFrom(mustAddr("203.0.113.32")); !slices.Equal(names, []string{"api.example.com"}) {
		t.Errorf("after Prune LearnedFrom = %v", names)
	}
	// The cache is emptied: the allowed name is forwarded again.
	e.ask(t, "api.example.com.", dns.TypeA)
	if n := e.stub.count("api.example.com"); n != 2 {
		t.Errorf("stub saw %d queries for api.example.com, want 2 (cache emptied)", n)
	}
}

func TestListenLoopbackOnPreferredPorts(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	p4, p6 := e.r.Ports()
	e.r.Close()

	r, err := New(Config{Policy: testPolicy(t), Upstreams: []string{e.stub.addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if err := r.ListenLoopbackOn(p4, p6); err != nil {
		t.Fatal(err)
	}
	if g4, g6 := r.Ports(); g4 != p4 || g6 != p6 {
		t.Errorf("ports %d, %d; want the preferred %d, %d", g4, g6, p4, p6)
	}

	// A taken port falls back to another one.
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := uint16(busy.LocalAddr().(*net.UDPAddr).Port)
	r2, err := New(Config{Policy: testPolicy(t), Upstreams: []string{e.stub.addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r2.Close)
	if err := r2.ListenLoopbackOn(taken, 0); err != nil {
		t.Fatal(err)
	}
	if g4, _ := r2.Ports(); g4 == taken || g4 == 0 {
		t.Errorf("port %d with %d taken", g4, taken)
	}
}
