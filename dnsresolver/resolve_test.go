// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/allowlist"
)

var apiZone = zone{
	"api.example.com. A":    {"api.example.com. 300 IN A 203.0.113.5"},
	"api.example.com. AAAA": {"api.example.com. 300 IN AAAA 2001:db8::5"},
}

func TestResolveAllowedEndToEnd(t *testing.T) {
	transports := []struct {
		name, network string
		v6            bool
	}{
		{"udp4", "udp", false},
		{"tcp4", "tcp", false},
		{"udp6", "udp", true},
		{"tcp6", "tcp", true},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			e := newEnv(t, apiZone, nil)
			addr := e.addr4()
			if tr.v6 {
				addr = e.addr6()
			}
			now := e.clock.Now()
			for _, q := range []struct {
				qtype uint16
				want  netip.Addr
			}{
				{dns.TypeA, mustAddr("203.0.113.5")},
				{dns.TypeAAAA, mustAddr("2001:db8::5")},
			} {
				resp := exchange(t, tr.network, addr, query("api.example.com.", q.qtype))
				replySeq := seq.Add(1)
				if resp.Rcode != dns.RcodeSuccess || !resp.Response || !resp.RecursionAvailable {
					t.Fatalf("%s: rcode %s, QR %v, RA %v", dns.TypeToString[q.qtype], rcode(resp), resp.Response, resp.RecursionAvailable)
				}
				if got := answerAddrs(resp); !slices.Equal(got, []netip.Addr{q.want}) {
					t.Errorf("%s: answer %v, want %v", dns.TypeToString[q.qtype], got, q.want)
				}
				var found bool
				for _, c := range e.learner.calls() {
					if c.Addr == q.want {
						found = true
						if c.Seq >= replySeq {
							t.Errorf("%v learned after the reply arrived", c.Addr)
						}
						if want := now + 300*time.Second + 10*time.Second; c.Expires != want {
							t.Errorf("%v expires %v, want %v (TTL + grace)", c.Addr, c.Expires, want)
						}
					}
				}
				if !found {
					t.Errorf("%v was not learned", q.want)
				}
			}
			if n := e.stub.count("api.example.com"); n != 2 {
				t.Errorf("stub saw %d queries, want 2", n)
			}
			if evs := e.events.all(); len(evs) != 0 {
				t.Errorf("events %v, want none", evs)
			}
			if n := e.r.LearnedCount(); n != 2 {
				t.Errorf("LearnedCount %d, want 2", n)
			}
		})
	}
}

// The reply cannot reach the client before Learn returned.
func TestLearnBeforeReply(t *testing.T) {
	l := &fakeLearner{entered: make(chan netip.Addr, 1), release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(l.release) }) }
	e := newEnv(t, apiZone, nil, func(c *Config) { c.Learner = l })
	t.Cleanup(release)

	got := make(chan *dns.Msg, 1)
	go func() {
		c := &dns.Client{Timeout: 5 * time.Second}
		r, _, err := c.Exchange(query("api.example.com.", dns.TypeA), e.addr4())
		if err != nil {
			r = nil
		}
		got <- r
	}()
	select {
	case a := <-l.entered:
		if a != mustAddr("203.0.113.5") {
			t.Fatalf("Learn(%v), want 203.0.113.5", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Learn was not called")
	}
	select {
	case <-got:
		t.Fatal("the reply arrived while Learn was still running")
	case <-time.After(100 * time.Millisecond):
	}
	release()
	select {
	case r := <-got:
		if r == nil || !slices.Equal(answerAddrs(r), []netip.Addr{mustAddr("203.0.113.5")}) {
			t.Fatalf("reply %v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reply after Learn returned")
	}
}

func TestClientCaseAndEDNS(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	m := query("API.Example.COM.", dns.TypeA)
	m.SetEdns0(4096, true)
	resp := exchange(t, "udp", e.addr4(), m)
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
		t.Fatalf("reply %v", resp)
	}
	if resp.Question[0].Name != "API.Example.COM." {
		t.Errorf("question %q, want the client's spelling", resp.Question[0].Name)
	}
	opt := resp.IsEdns0()
	if opt == nil || !opt.Do() {
		t.Errorf("reply OPT %v, want one with DO", opt)
	}
	qs := e.stub.queries()
	if len(qs) != 1 || qs[0].Name != "api.example.com." {
		t.Fatalf("stub saw %+v, want the normalised name", qs)
	}
	if qs[0].EDNS == nil || qs[0].EDNS.UDPSize() != upstreamUDPSize || !qs[0].EDNS.Do() {
		t.Errorf("upstream OPT %v, want size %d with DO", qs[0].EDNS, upstreamUDPSize)
	}
	// Without EDNS0 from the client, no OPT in the reply.
	resp = exchange(t, "udp", e.addr4(), query("api.example.com.", dns.TypeAAAA))
	if resp.IsEdns0() != nil {
		t.Errorf("reply to a query without EDNS0 has an OPT record")
	}
}

func TestRefusedNotForwarded(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	label := fmt.Sprintf("secret-%016x", rand.Uint64())
	names := []string{
		label + ".example.org.",
		label + ".api.example.com.", // under a host entry: not allowed
		"example.net.",              // the apex of a wildcard
		"API2.example.com.",
		label + ".example.net.evil.test.",
	}
	for _, name := range names {
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT} {
			resp := e.ask(t, name, qtype)
			if resp.Rcode != dns.RcodeRefused || len(resp.Answer) != 0 {
				t.Errorf("%s %s: rcode %s with %d answers, want REFUSED", name, dns.TypeToString[qtype], rcode(resp), len(resp.Answer))
			}
		}
	}
	if qs := e.stub.queries(); len(qs) != 0 {
		t.Errorf("upstream saw %+v: a refused name was forwarded", qs)
	}
	evs := e.events.of(EventRefused)
	if len(evs) != 3*len(names) {
		t.Fatalf("%d EventRefused, want %d", len(evs), 3*len(names))
	}
	for _, ev := range evs {
		if ev.Audit || !strings.Contains(strings.ToLower(strings.Join(names, " ")), ev.Name) || strings.HasSuffix(ev.Name, ".") {
			t.Errorf("event %+v", ev)
		}
		if !ev.Client.Addr().IsLoopback() {
			t.Errorf("event client %v, want the loopback socket that asked", ev.Client)
		}
	}
	if evs[0].Name != label+".example.org" || evs[0].QType != "A" {
		t.Errorf("first event %+v", evs[0])
	}
	if len(e.learner.calls()) != 0 {
		t.Errorf("learned %v", e.learner.calls())
	}
}

func TestAuditForwardsAndReports(t *testing.T) {
	label := fmt.Sprintf("audit-%016x", rand.Uint64())
	z := zone{
		label + ".example.org. A": {label + ".example.org. 300 IN A 203.0.113.44"},
		"rb.example.net. A":       {"rb.example.net. 300 IN A 10.0.0.5"},
	}
	e := newEnv(t, z, nil, func(c *Config) { c.Audit = true })
	resp := e.ask(t, label+".example.org.", dns.TypeA)
	if resp.Rcode != dns.RcodeSuccess || !slices.Equal(answerAddrs(resp), []netip.Addr{mustAddr("203.0.113.44")}) {
		t.Fatalf("audit: reply %v", resp)
	}
	if n := e.stub.count(label + ".example.org"); n != 1 {
		t.Errorf("audit: stub saw %d queries, want 1", n)
	}
	evs := e.events.of(EventRefused)
	if len(evs) != 1 || !evs[0].Audit || evs[0].Name != label+".example.org" {
		t.Errorf("audit events %+v, want one EventRefused with Audit", evs)
	}
	if !strings.HasPrefix(evs[0].String(), "audit: would refuse") {
		t.Errorf("audit event reads %q", evs[0].String())
	}
	if _, ok := e.learner.addrs()[mustAddr("203.0.113.44")]; !ok {
		t.Errorf("audit: answer not learned")
	}

	// A rebinding answer is reported, and kept and learned.
	resp = e.ask(t, "rb.example.net.", dns.TypeA)
	if !slices.Equal(answerAddrs(resp), []netip.Addr{mustAddr("10.0.0.5")}) {
		t.Errorf("audit: rebinding answer %v, want it kept", answerAddrs(resp))
	}
	rb := e.events.of(EventRebinding)
	if len(rb) != 1 || !rb[0].Audit || rb[0].Addr != mustAddr("10.0.0.5") {
		t.Errorf("audit: rebinding events %+v", rb)
	}
	if _, ok := e.learner.addrs()[mustAddr("10.0.0.5")]; !ok {
		t.Errorf("audit: rebinding address not learned")
	}
}

func TestSetPolicy(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	if resp := e.ask(t, "api.example.com.", dns.TypeA); resp.Rcode != dns.RcodeSuccess {
		t.Fatalf("rcode %s", rcode(resp))
	}
	p, err := allowlist.FromStrings([]string{"*.example.net"})
	if err != nil {
		t.Fatal(err)
	}
	e.r.SetPolicy(p)
	// Refused even though the answer is cached.
	if resp := e.ask(t, "api.example.com.", dns.TypeA); resp.Rcode != dns.RcodeRefused {
		t.Errorf("after SetPolicy: rcode %s, want REFUSED", rcode(resp))
	}
}

func TestCNAMEChain(t *testing.T) {
	z := zone{
		"api.example.com. A": {
			"api.example.com. 300 IN CNAME edge.cdn.example.net.",
			"edge.cdn.example.net. 60 IN A 198.51.100.7",
			"evil.example.org. 60 IN A 203.0.113.66",
		},
		"api.example.com. AAAA": {
			"api.example.com. 300 IN CNAME edge.cdn.example.net.",
			"edge.cdn.example.net. 60 IN AAAA 2001:db8::7",
			"api.example.org. 60 IN AAAA 2001:db8::66",
		},
		"loop1.example.net. A": {
			"loop1.example.net. 300 IN CNAME loop2.example.net.",
			"loop2.example.net. 300 IN CNAME loop1.example.net.",
		},
	}
	e := newEnv(t, z, nil)
	resp := e.ask(t, "api.example.com.", dns.TypeA)
	if got := owners(resp); !slices.Equal(got, []string{"api.example.com. CNAME", "edge.cdn.example.net. A"}) {
		t.Errorf("A answer %v", got)
	}
	resp = e.ask(t, "api.example.com.", dns.TypeAAAA)
	if got := answerAddrs(resp); !slices.Equal(got, []netip.Addr{mustAddr("2001:db8::7")}) {
		t.Errorf("AAAA answer %v", got)
	}
	learned := e.learner.addrs()
	for _, a := range []string{"198.51.100.7", "2001:db8::7"} {
		if _, ok := learned[mustAddr(a)]; !ok {
			t.Errorf("%s (end of the chain) not learned", a)
		}
	}
	for _, a := range []string{"203.0.113.66", "2001:db8::66"} {
		if _, ok := learned[mustAddr(a)]; ok {
			t.Errorf("%s (unrelated owner) learned", a)
		}
	}

	start := time.Now()
	resp = e.ask(t, "loop1.example.net.", dns.TypeA)
	if resp.Rcode != dns.RcodeSuccess || len(answerAddrs(resp)) != 0 || time.Since(start) > 2*time.Second {
		t.Errorf("CNAME loop: rcode %s, answer %v after %v", rcode(resp), resp.Answer, time.Since(start))
	}
}

func TestRebindingAnswers(t *testing.T) {
	bad := []string{"127.0.0.1", "10.0.0.5", "169.254.169.254", "100.64.1.1", "::1", "fd00::1", "fe80::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1"}
	z := zone{}
	publicOf := func(i int, v6 bool) netip.Addr {
		if v6 {
			return mustAddr(fmt.Sprintf("2001:db8::%x", 0x100+i))
		}
		return mustAddr(fmt.Sprintf("203.0.113.%d", 100+i))
	}
	for i, s := range bad {
		a := mustAddr(s)
		typ := "A"
		if a.Is6() {
			typ = "AAAA"
		}
		for _, name := range []string{fmt.Sprintf("rb%d.example.net.", i), fmt.Sprintf("rb%d.private.example.net.", i)} {
			z[name+" "+typ] = []string{
				fmt.Sprintf("%s 300 IN %s %s", name, typ, s),
				fmt.Sprintf("%s 300 IN %s %s", name, typ, publicOf(i, a.Is6())),
			}
		}
	}
	e := newEnv(t, z, nil)
	for i, s := range bad {
		t.Run(s, func(t *testing.T) {
			a := mustAddr(s)
			qtype := dns.TypeA
			if a.Is6() {
				qtype = dns.TypeAAAA
			}
			public := publicOf(i, a.Is6())

			name := fmt.Sprintf("rb%d.example.net.", i)
			before := len(e.learner.calls())
			resp := e.ask(t, name, qtype)
			if got := answerAddrs(resp); !slices.Equal(got, []netip.Addr{public}) {
				t.Errorf("answer %v, want only %v", got, public)
			}
			if calls := e.learner.calls()[before:]; len(calls) != 1 || calls[0].Addr != public {
				t.Errorf("learned %v, want only the public %v", calls, public)
			}
			var ev *Event
			for _, x := range e.events.of(EventRebinding) {
				if x.Addr == a {
					ev = &x
				}
			}
			if ev == nil {
				t.Fatalf("no EventRebinding for %v in %v", a, e.events.all())
			}
			if strings.TrimSuffix(ev.Name, ".") != strings.TrimSuffix(name, ".") || ev.Reason == "" || ev.Audit {
				t.Errorf("event %+v", *ev)
			}

			// With allow_private the address is kept and learned.
			pname := fmt.Sprintf("rb%d.private.example.net.", i)
			beforeEvents := len(e.events.of(EventRebinding))
			resp = e.ask(t, pname, qtype)
			got := answerAddrs(resp)
			if !slices.Contains(got, a) || !slices.Contains(got, public) {
				t.Errorf("allow_private: answer %v, want %v and %v", got, a, public)
			}
			// (::ffff:127.0.0.1 is learned as 127.0.0.1, which an earlier
			// subtest may have taught already with the same expiry.)
			if _, ok := e.learner.addrs()[a.Unmap()]; !ok {
				t.Errorf("allow_private: %v not learned", a.Unmap())
			}
			if after := len(e.events.of(EventRebinding)); after != beforeEvents {
				t.Errorf("allow_private: a rebinding event was raised")
			}
		})
	}
}

// ...and their ECH configs (issue 18): a client without one sends its
// real SNI, which the session's verifier checks.
func TestHTTPSRecordsLoseHints(t *testing.T) {
	z := zone{
		"api.example.com. HTTPS": {"api.example.com. 300 IN HTTPS 1 . alpn=h2,h3 ipv4hint=203.0.113.5 ipv6hint=2001:db8::5 ech=AEX+DQBBpQAgACCW2/dfOBZAtQU55/znnA=="},
		"api.example.com. SVCB":  {"api.example.com. 300 IN SVCB 1 svc.example.net. alpn=h2 ipv4hint=10.0.0.5"},
	}
	e := newEnv(t, z, nil)
	for _, qtype := range []uint16{dns.TypeHTTPS, dns.TypeSVCB} {
		resp := e.ask(t, "api.example.com.", qtype)
		if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
			t.Fatalf("%s: reply %v", dns.TypeToString[qtype], resp)
		}
		var kv []dns.SVCBKeyValue
		switch r := resp.Answer[0].(type) {
		case *dns.HTTPS:
			kv = r.Value
		case *dns.SVCB:
			kv = r.Value
		}
		var keys []string
		for _, v := range kv {
			keys = append(keys, v.Key().String())
		}
		if !slices.Equal(keys, []string{"alpn"}) {
			t.Errorf("%s: params %v, want only alpn", dns.TypeToString[qtype], keys)
		}
	}
	if calls := e.learner.calls(); len(calls) != 0 {
		t.Errorf("hints learned: %v", calls)
	}
	if evs := e.events.all(); len(evs) != 0 {
		t.Errorf("events %v", evs)
	}
}

// TXT, MX, SRV and friends of allowed names are forwarded unchanged.
func TestOtherTypesForwarded(t *testing.T) {
	z := zone{
		"api.example.com. TXT": {"api.example.com. 300 IN TXT \"v=spf1 -all\""},
		"api.example.com. MX":  {"api.example.com. 300 IN MX 10 mail.example.com."},
		"_x._tcp.example.net. SRV": {
			"_x._tcp.example.net. 300 IN SRV 0 0 443 api.example.com.",
		},
	}
	e := newEnv(t, z, nil)
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"api.example.com.", dns.TypeTXT}, {"api.example.com.", dns.TypeMX}, {"_x._tcp.example.net.", dns.TypeSRV}} {
		resp := e.ask(t, q.name, q.qtype)
		if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 || resp.Answer[0].Header().Rrtype != q.qtype {
			t.Errorf("%s %s: %v", q.name, dns.TypeToString[q.qtype], resp)
		}
	}
}

func TestTTLClamping(t *testing.T) {
	z := zone{
		"ttl1.example.net. A":   {"ttl1.example.net. 1 IN A 203.0.113.11"},
		"ttlday.example.net. A": {"ttlday.example.net. 86400 IN A 203.0.113.12"},
		"long.example.net. A":   {"long.example.net. 3600 IN A 203.0.113.13"},
		"short.example.net. A":  {"short.example.net. 10 IN A 203.0.113.13"},
		"later.example.net. A":  {"later.example.net. 3600 IN A 203.0.113.13"},
	}
	e := newEnv(t, z, nil)
	const grace = 10 * time.Second
	now := e.clock.Now()

	resp := e.ask(t, "ttl1.example.net.", dns.TypeA)
	if ttl := resp.Answer[0].Header().Ttl; ttl != 1 {
		t.Errorf("reply TTL %d, want the upstream's 1 (only the learned lifetime is raised)", ttl)
	}
	if got, want := e.learner.addrs()[mustAddr("203.0.113.11")], now+5*time.Second+grace; got != want {
		t.Errorf("TTL 1 s learned until %v, want now+MinTTL+Grace = %v", got, want)
	}

	resp = e.ask(t, "ttlday.example.net.", dns.TypeA)
	if ttl := resp.Answer[0].Header().Ttl; ttl != 3600 {
		t.Errorf("reply TTL %d, want 3600 (MaxTTL)", ttl)
	}
	if got, want := e.learner.addrs()[mustAddr("203.0.113.12")], now+time.Hour+grace; got != want {
		t.Errorf("TTL 1 day learned until %v, want now+MaxTTL+Grace = %v", got, want)
	}

	// A long expiry is not shortened by a shorter answer for another name.
	a := mustAddr("203.0.113.13")
	e.ask(t, "long.example.net.", dns.TypeA)
	e.ask(t, "short.example.net.", dns.TypeA)
	if got, want := e.learner.addrs()[a], now+time.Hour+grace; got != want {
		t.Errorf("after a shorter answer %v expires %v, want %v", a, got, want)
	}
	// A later, longer answer extends it.
	e.clock.Advance(30 * time.Minute)
	e.ask(t, "later.example.net.", dns.TypeA)
	if got, want := e.learner.addrs()[a], now+30*time.Minute+time.Hour+grace; got != want {
		t.Errorf("after a later answer %v expires %v, want %v", a, got, want)
	}
	// The learner never saw an expiry go down.
	last := map[netip.Addr]time.Duration{}
	for _, c := range e.learner.calls() {
		if c.Expires < last[c.Addr] {
			t.Errorf("%v: expiry went down from %v to %v", c.Addr, last[c.Addr], c.Expires)
		}
		last[c.Addr] = c.Expires
	}
	var n int
	for _, c := range e.learner.calls() {
		if c.Addr == a {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%v taught %d times, want 2 (the shorter answer needs no update)", a, n)
	}
}

func TestCache(t *testing.T) {
	z := zone{
		"cache.example.net. A": {"cache.example.net. 300 IN A 203.0.113.15"},
		"zero.example.net. A":  {"zero.example.net. 0 IN A 203.0.113.16"},
	}
	e := newEnv(t, z, nil)
	ttl := func(m *dns.Msg) uint32 {
		t.Helper()
		if len(m.Answer) != 1 {
			t.Fatalf("answer %v", m.Answer)
		}
		return m.Answer[0].Header().Ttl
	}
	if got := ttl(e.ask(t, "cache.example.net.", dns.TypeA)); got != 300 {
		t.Errorf("first TTL %d", got)
	}
	if got := ttl(e.ask(t, "CACHE.example.net.", dns.TypeA)); got != 300 {
		t.Errorf("cached TTL %d, want 300", got)
	}
	if n := e.stub.count("cache.example.net"); n != 1 {
		t.Errorf("stub saw %d queries, want 1 (second answered from the cache)", n)
	}
	e.clock.Advance(30 * time.Second)
	resp := e.ask(t, "cache.example.net.", dns.TypeA)
	if got := ttl(resp); got != 270 {
		t.Errorf("TTL after 30 s %d, want 270", got)
	}
	if resp.Question[0].Name != "cache.example.net." {
		t.Errorf("cached reply question %q", resp.Question[0].Name)
	}
	if n := e.stub.count("cache.example.net"); n != 1 {
		t.Errorf("stub saw %d queries, want 1", n)
	}
	// Over TCP too, from the same cache.
	if got := ttl(exchange(t, "tcp", e.addr4(), query("cache.example.net.", dns.TypeA))); got != 270 {
		t.Errorf("TCP cached TTL %d", got)
	}
	e.clock.Advance(271 * time.Second)
	if got := ttl(e.ask(t, "cache.example.net.", dns.TypeA)); got != 300 {
		t.Errorf("TTL after expiry %d, want a fresh 300", got)
	}
	if n := e.stub.count("cache.example.net"); n != 2 {
		t.Errorf("stub saw %d queries, want 2 (expired entry forwarded again)", n)
	}

	// TTL 0 is not cached.
	e.ask(t, "zero.example.net.", dns.TypeA)
	e.ask(t, "zero.example.net.", dns.TypeA)
	if n := e.stub.count("zero.example.net"); n != 2 {
		t.Errorf("TTL 0: stub saw %d queries, want 2", n)
	}

	// NXDOMAIN is cached for the SOA minimum.
	for range 2 {
		if resp := e.ask(t, "nx.example.net.", dns.TypeA); resp.Rcode != dns.RcodeNameError {
			t.Fatalf("rcode %s, want NXDOMAIN", rcode(resp))
		}
	}
	if n := e.stub.count("nx.example.net"); n != 1 {
		t.Errorf("NXDOMAIN: stub saw %d queries, want 1", n)
	}
	e.clock.Advance(61 * time.Second)
	e.ask(t, "nx.example.net.", dns.TypeA)
	if n := e.stub.count("nx.example.net"); n != 2 {
		t.Errorf("NXDOMAIN after SOA minimum: stub saw %d queries, want 2", n)
	}
}

func TestCacheBounded(t *testing.T) {
	z := zone{}
	for i := range 10 {
		name := fmt.Sprintf("c%d.example.net.", i)
		z[name+" A"] = []string{fmt.Sprintf("%s 300 IN A 203.0.113.%d", name, 50+i)}
	}
	e := newEnv(t, z, nil, func(c *Config) { c.CacheSize = 3 })
	for i := range 10 {
		e.ask(t, fmt.Sprintf("c%d.example.net.", i), dns.TypeA)
	}
	e.r.cache.mu.Lock()
	n := len(e.r.cache.m)
	e.r.cache.mu.Unlock()
	if n > 3 {
		t.Errorf("cache holds %d entries, bound 3", n)
	}
}

func TestPerNameCapAndMapFull(t *testing.T) {
	z := zone{
		"three.example.net. A": {
			"three.example.net. 300 IN A 203.0.113.1",
			"three.example.net. 300 IN A 203.0.113.2",
			"three.example.net. 300 IN A 203.0.113.3",
		},
		"two.example.net. A": {
			"two.example.net. 300 IN A 203.0.113.4",
			"two.example.net. 300 IN A 203.0.113.5",
		},
		// A repeated record is one address, not two.
		"dup.example.net. A": {
			"dup.example.net. 300 IN A 203.0.113.6",
			"dup.example.net. 300 IN A 203.0.113.6",
			"dup.example.net. 300 IN A 203.0.113.7",
		},
	}
	e := newEnv(t, z, nil, func(c *Config) { c.MaxIPsPerName = 2 })
	resp := e.ask(t, "three.example.net.", dns.TypeA)
	if resp.Rcode != dns.RcodeServerFailure || len(resp.Answer) != 0 {
		t.Errorf("over the cap: rcode %s, answer %v; want SERVFAIL", rcode(resp), resp.Answer)
	}
	if evs := e.events.of(EventCapReached); len(evs) != 1 || evs[0].Name != "three.example.net" {
		t.Errorf("cap events %+v", evs)
	}
	if calls := e.learner.calls(); len(calls) != 0 {
		t.Errorf("learned %v over the cap", calls)
	}
	if resp := e.ask(t, "two.example.net.", dns.TypeA); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 2 {
		t.Errorf("at the cap: rcode %s, answer %v; want both", rcode(resp), resp.Answer)
	}
	if resp := e.ask(t, "dup.example.net.", dns.TypeA); resp.Rcode != dns.RcodeSuccess {
		t.Errorf("two distinct addresses, one repeated: rcode %s, want NOERROR", rcode(resp))
	}
	if n := len(e.learner.addrs()); n != 4 {
		t.Errorf("learned %d addresses, want 4", n)
	}

	// The datapath's map is full.
	l := &fakeLearner{err: fmt.Errorf("learn 203.0.113.5: %w", ErrMapFull)}
	e = newEnv(t, apiZone, nil, func(c *Config) { c.Learner = l })
	for range 2 {
		if resp := e.ask(t, "api.example.com.", dns.TypeA); resp.Rcode != dns.RcodeServerFailure {
			t.Errorf("map full: rcode %s, want SERVFAIL", rcode(resp))
		}
	}
	if evs := e.events.of(EventMapFull); len(evs) != 2 || evs[0].Name != "api.example.com" || !strings.Contains(evs[0].Reason, "full") {
		t.Errorf("map full events %+v", evs)
	}
	if n := e.stub.count("api.example.com"); n != 2 {
		t.Errorf("stub saw %d queries: a failed answer must not be cached", n)
	}
	if n := e.r.LearnedCount(); n != 0 {
		t.Errorf("LearnedCount %d after a failed Learn", n)
	}
}

// manyAnswersHook answers name with n A records; over UDP, with only TC
// set if truncate is (an upstream that honours the size sluice asks for),
// or with all n regardless (one that does not).
func manyAnswersHook(name string, n int, truncate bool) func(w dns.ResponseWriter, req *dns.Msg, tcp bool) bool {
	return func(w dns.ResponseWriter, req *dns.Msg, tcp bool) bool {
		if len(req.Question) != 1 || req.Question[0].Name != name {
			return false
		}
		m := new(dns.Msg)
		m.SetReply(req)
		if !tcp && truncate {
			m.Truncated = true
		} else {
			for i := range n {
				m.Answer = append(m.Answer, &dns.A{
					Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
					A:   net.IPv4(203, 0, 113, byte(i+1)),
				})
			}
		}
		_ = w.WriteMsg(m)
		return true
	}
}

// bigAnswerHook answers big.example.net with TC over UDP and with n A
// records over TCP.
func bigAnswerHook(n int) func(w dns.ResponseWriter, req *dns.Msg, tcp bool) bool {
	return manyAnswersHook("big.example.net.", n, true)
}

func TestTruncation(t *testing.T) {
	const n = 100
	e := newEnv(t, nil, bigAnswerHook(n), func(c *Config) { c.MaxIPsPerName = 200 })

	// TCP client: the full answer, fetched upstream over TCP after TC.
	resp := exchange(t, "tcp", e.addr4(), query("big.example.net.", dns.TypeA))
	if resp.Truncated || len(resp.Answer) != n {
		t.Fatalf("TCP: TC %v with %d answers, want %d", resp.Truncated, len(resp.Answer), n)
	}
	var kinds []string
	for _, q := range e.stub.queries() {
		if q.TCP {
			kinds = append(kinds, "tcp")
		} else {
			kinds = append(kinds, "udp")
		}
	}
	if !slices.Equal(kinds, []string{"udp", "tcp"}) {
		t.Errorf("upstream saw %v, want udp then tcp", kinds)
	}
	if got := len(e.learner.addrs()); got != n {
		t.Errorf("learned %d, want %d", got, n)
	}

	// UDP client without EDNS0: at most 512 bytes, TC set.
	c, err := net.Dial("udp", e.addr4())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := query("big.example.net.", dns.TypeA)
	wire, _ := q.Pack()
	if _, err := c.Write(wire); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 65535)
	nr, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if nr > dns.MinMsgSize {
		t.Errorf("UDP reply without EDNS0 is %d bytes, want at most %d", nr, dns.MinMsgSize)
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:nr]); err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || r.Id != q.Id || len(r.Answer) == 0 || len(r.Answer) >= n {
		t.Errorf("UDP reply: TC %v, ID %d (want %d), %d answers", r.Truncated, r.Id, q.Id, len(r.Answer))
	}

	// UDP client with a big EDNS0 buffer: the whole answer.
	resp = e.ask(t, "big.example.net.", dns.TypeA)
	if resp.Truncated || len(resp.Answer) != n {
		t.Errorf("UDP with EDNS0 4096: TC %v with %d answers", resp.Truncated, len(resp.Answer))
	}
}

func TestSpoofedRepliesIgnored(t *testing.T) {
	a := func(name, ip string) dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.ParseIP(ip)}
	}
	hook := func(w dns.ResponseWriter, req *dns.Msg, tcp bool) bool {
		if tcp || req.Question[0].Name != "spoof.example.net." {
			return false
		}
		// Same ID, another question.
		m1 := new(dns.Msg)
		m1.SetQuestion("evil.example.net.", dns.TypeA)
		m1.Id, m1.Response = req.Id, true
		m1.Answer = []dns.RR{a("spoof.example.net.", "203.0.113.66")}
		// Right question, another ID.
		m2 := new(dns.Msg)
		m2.SetReply(req)
		m2.Id = req.Id + 1
		m2.Answer = []dns.RR{a("spoof.example.net.", "203.0.113.67")}
		// Right question and ID, but a query, not a response.
		m3 := new(dns.Msg)
		m3.SetReply(req)
		m3.Response = false
		m3.Answer = []dns.RR{a("spoof.example.net.", "203.0.113.68")}
		// Right question, other type.
		m4 := new(dns.Msg)
		m4.SetReply(req)
		m4.Question[0].Qtype = dns.TypeAAAA
		m4.Answer = []dns.RR{a("spoof.example.net.", "203.0.113.69")}
		// Garbage.
		_, _ = w.Write([]byte{0xde, 0xad})
		for _, m := range []*dns.Msg{m1, m2, m3, m4} {
			_ = w.WriteMsg(m)
		}
		good := new(dns.Msg)
		good.SetReply(req)
		good.Answer = []dns.RR{a("spoof.example.net.", "203.0.113.7")}
		_ = w.WriteMsg(good)
		return true
	}
	e := newEnv(t, nil, hook)
	resp := e.ask(t, "spoof.example.net.", dns.TypeA)
	if got := answerAddrs(resp); !slices.Equal(got, []netip.Addr{mustAddr("203.0.113.7")}) {
		t.Errorf("answer %v, want only the genuine 203.0.113.7", got)
	}
	learned := e.learner.addrs()
	if len(learned) != 1 {
		t.Errorf("learned %v, want only 203.0.113.7", learned)
	}
}

func TestUpstreamIDsRandom(t *testing.T) {
	e := newEnv(t, nil, nil)
	const n = 64
	for i := range n {
		e.ask(t, fmt.Sprintf("id%d.example.net.", i), dns.TypeA)
	}
	var ids []uint16
	for _, q := range e.stub.queries() {
		ids = append(ids, q.ID)
	}
	if len(ids) != n {
		t.Fatalf("stub saw %d queries, want %d", len(ids), n)
	}
	distinct := map[uint16]bool{}
	sequential := 0
	for i, id := range ids {
		distinct[id] = true
		if i > 0 && (id == ids[i-1]+1 || id == ids[i-1]) {
			sequential++
		}
	}
	if len(distinct) < n-4 {
		t.Errorf("%d distinct IDs among %d queries: %v", len(distinct), n, ids)
	}
	if sequential > 2 {
		t.Errorf("%d IDs follow their predecessor: %v", sequential, ids)
	}
}

func TestUpstreamSocketReuse(t *testing.T) {
	e := newEnv(t, nil, nil)
	const n = 120
	var wg sync.WaitGroup
	names := make(chan string)
	for range 8 {
		wg.Go(func() {
			for name := range names {
				resp := exchange(t, "udp", e.addr4(), query(name, dns.TypeA))
				if resp.Rcode != dns.RcodeNameError {
					t.Errorf("%s: rcode %s", name, rcode(resp))
				}
			}
		})
	}
	for i := range n {
		names <- fmt.Sprintf("reuse%d.example.net.", i)
	}
	close(names)
	wg.Wait()
	ports := map[uint16]int{}
	qs := e.stub.queries()
	for _, q := range qs {
		ports[q.From.Port()]++
	}
	if len(qs) != n {
		t.Fatalf("stub saw %d queries, want %d", len(qs), n)
	}
	if len(ports) > socketsPerUpstream+2 {
		t.Errorf("%d source ports for %d queries, want at most %d: %v", len(ports), n, socketsPerUpstream+2, ports)
	}
	if len(ports) < 2 {
		t.Errorf("all %d queries from one source port", n)
	}
}

func TestUpstreamTimeout(t *testing.T) {
	dead := startStub(t, nil, func(dns.ResponseWriter, *dns.Msg, bool) bool { return true })
	const timeout = 150 * time.Millisecond

	e := newEnv(t, apiZone, nil, func(c *Config) {
		c.Upstreams = []string{dead.addr}
		c.Timeout = timeout
	})
	start := time.Now()
	resp := e.ask(t, "api.example.com.", dns.TypeA)
	elapsed := time.Since(start)
	if resp.Rcode != dns.RcodeServerFailure {
		t.Errorf("dead upstream: rcode %s, want SERVFAIL", rcode(resp))
	}
	if elapsed < timeout || elapsed > timeout+time.Second {
		t.Errorf("SERVFAIL after %v, want about %v", elapsed, timeout)
	}
	if evs := e.events.of(EventUpstreamFailed); len(evs) != 1 || evs[0].Name != "api.example.com" {
		t.Errorf("events %+v, want one EventUpstreamFailed", e.events.all())
	}

	// A second upstream answers when the first times out.
	good := startStub(t, apiZone, nil)
	e = newEnv(t, nil, nil, func(c *Config) {
		c.Upstreams = []string{dead.addr, good.addr}
		c.Timeout = timeout
	})
	start = time.Now()
	resp = e.ask(t, "api.example.com.", dns.TypeA)
	elapsed = time.Since(start)
	if resp.Rcode != dns.RcodeSuccess || !slices.Equal(answerAddrs(resp), []netip.Addr{mustAddr("203.0.113.5")}) {
		t.Errorf("fallback: %v", resp)
	}
	if elapsed < timeout || elapsed > timeout+time.Second {
		t.Errorf("fallback answer after %v, want about %v", elapsed, timeout)
	}
	if evs := e.events.of(EventUpstreamFailed); len(evs) != 0 {
		t.Errorf("fallback raised %+v", evs)
	}
	if good.count("api.example.com") != 1 {
		t.Errorf("second upstream not asked")
	}
}

// A slow answer does not hold up others.
func TestNoHeadOfLineBlocking(t *testing.T) {
	slow := make(chan struct{})
	hook := func(w dns.ResponseWriter, req *dns.Msg, tcp bool) bool {
		if req.Question[0].Name == "slow.example.net." {
			<-slow
		}
		return false
	}
	e := newEnv(t, apiZone, hook, func(c *Config) { c.Timeout = 3 * time.Second })
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := &dns.Client{Timeout: 5 * time.Second}
		_, _, _ = c.Exchange(query("slow.example.net.", dns.TypeA), e.addr4())
	}()
	waitFor(t, "the slow query to reach the upstream", func() bool { return e.stub.count("slow.example.net") == 1 })
	start := time.Now()
	resp := e.ask(t, "api.example.com.", dns.TypeA)
	if resp.Rcode != dns.RcodeSuccess {
		t.Errorf("rcode %s", rcode(resp))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("answer took %v behind a slow query", d)
	}
	close(slow)
	<-done
}

func TestPTR(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	e.ask(t, "api.example.com.", dns.TypeA)
	e.ask(t, "api.example.com.", dns.TypeAAAA)
	for _, ip := range []string{"203.0.113.5", "2001:db8::5"} {
		rev, err := dns.ReverseAddr(ip)
		if err != nil {
			t.Fatal(err)
		}
		resp := e.ask(t, rev, dns.TypePTR)
		if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
			t.Fatalf("PTR %s: rcode %s, answer %v", ip, rcode(resp), resp.Answer)
		}
		ptr, ok := resp.Answer[0].(*dns.PTR)
		if !ok || ptr.Ptr != "api.example.com." || ptr.Hdr.Name != rev || ptr.Hdr.Ttl == 0 {
			t.Errorf("PTR %s: %v", ip, resp.Answer[0])
		}
	}
	for _, name := range []string{"99.113.0.203.in-addr.arpa.", "api.example.com.", "113.0.203.in-addr.arpa."} {
		if resp := e.ask(t, name, dns.TypePTR); resp.Rcode != dns.RcodeRefused {
			t.Errorf("PTR %s: rcode %s, want REFUSED", name, rcode(resp))
		}
	}
	if evs := e.events.of(EventRefused); len(evs) != 3 {
		t.Errorf("events %+v, want 3 EventRefused", evs)
	}
	// Expired addresses are not answered.
	e.clock.Advance(311 * time.Second)
	if resp := e.ask(t, "5.113.0.203.in-addr.arpa.", dns.TypePTR); resp.Rcode != dns.RcodeRefused {
		t.Errorf("PTR of an expired address: rcode %s, want REFUSED", rcode(resp))
	}
	for _, q := range e.stub.queries() {
		if q.Type == dns.TypePTR {
			t.Errorf("PTR query %s forwarded", q.Name)
		}
	}
}

func TestLocalhost(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, name := range []string{"localhost.", "foo.localhost.", "LOCALHOST.", "a.b.Localhost"} {
		for _, network := range []string{"udp", "tcp"} {
			resp := exchange(t, network, e.addr4(), query(dns.Fqdn(name), dns.TypeA))
			if resp.Rcode != dns.RcodeSuccess || !slices.Equal(answerAddrs(resp), []netip.Addr{mustAddr("127.0.0.1")}) {
				t.Errorf("%s A over %s: %v", name, network, resp)
			}
			resp = exchange(t, network, e.addr6(), query(dns.Fqdn(name), dns.TypeAAAA))
			if resp.Rcode != dns.RcodeSuccess || !slices.Equal(answerAddrs(resp), []netip.Addr{mustAddr("::1")}) {
				t.Errorf("%s AAAA over %s: %v", name, network, resp)
			}
		}
		if resp := e.ask(t, dns.Fqdn(name), dns.TypeMX); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 0 {
			t.Errorf("%s MX: %v", name, resp)
		}
	}
	if qs := e.stub.queries(); len(qs) != 0 {
		t.Errorf("localhost forwarded: %+v", qs)
	}
	if calls := e.learner.calls(); len(calls) != 0 {
		t.Errorf("localhost learned: %v", calls)
	}
}

func TestMalformedQueries(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	twoQ := query("api.example.com.", dns.TypeA)
	twoQ.Question = append(twoQ.Question, dns.Question{Name: "api.example.com.", Qtype: dns.TypeAAAA, Qclass: dns.ClassINET})
	noQ := query("api.example.com.", dns.TypeA)
	noQ.Question = nil
	notify := query("api.example.com.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	update := query("example.net.", dns.TypeSOA)
	update.Opcode = dns.OpcodeUpdate
	status := query("api.example.com.", dns.TypeA)
	status.Opcode = dns.OpcodeStatus
	chaos := query("version.bind.", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	chaosAllowed := query("api.example.com.", dns.TypeA)
	chaosAllowed.Question[0].Qclass = dns.ClassCHAOS
	anyClass := query("api.example.com.", dns.TypeA)
	anyClass.Question[0].Qclass = dns.ClassANY

	tests := []struct {
		name   string
		m      *dns.Msg
		rcode  int
		socket bool // also over a socket
	}{
		{"two questions", twoQ, dns.RcodeFormatError, true},
		{"no question", noQ, dns.RcodeFormatError, false},
		{"NOTIFY", notify, dns.RcodeNotImplemented, true},
		{"UPDATE", update, dns.RcodeNotImplemented, true},
		{"STATUS", status, dns.RcodeNotImplemented, true},
		{"class CHAOS", chaos, dns.RcodeRefused, true},
		{"class CHAOS, allowed name", chaosAllowed, dns.RcodeRefused, true},
		{"class ANY", anyClass, dns.RcodeRefused, true},
		{"NUL in a label", query("a\\000b.example.net.", dns.TypeA), dns.RcodeRefused, true},
		{"control byte in a label", query("a\\010.example.net.", dns.TypeA), dns.RcodeRefused, true},
		{"high byte in a label", query("\\200\\201.example.net.", dns.TypeA), dns.RcodeRefused, true},
		{"dot in a label", query("a\\.b.example.net.", dns.TypeA), dns.RcodeRefused, true},
		{"space in a label", query("a\\032b.example.net.", dns.TypeA), dns.RcodeRefused, true},
		{"root", query(".", dns.TypeNS), dns.RcodeRefused, true},
		{"numeric TLD", query("203.0.113.5.", dns.TypeA), dns.RcodeRefused, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := resolveDirect(e.r, tt.m)
			if resp == nil || resp.Id != tt.m.Id || !resp.Response {
				t.Fatalf("reply %v", resp)
			}
			if resp.Rcode != tt.rcode {
				t.Errorf("Resolve: rcode %s, want %s", rcode(resp), dns.RcodeToString[tt.rcode])
			}
			if len(resp.Answer) != 0 {
				t.Errorf("answer %v", resp.Answer)
			}
			if _, err := resp.Pack(); err != nil {
				t.Errorf("reply does not pack: %v", err)
			}
			if tt.socket {
				for _, network := range []string{"udp", "tcp"} {
					resp := exchange(t, network, e.addr4(), tt.m)
					if resp.Rcode != tt.rcode {
						t.Errorf("over %s: rcode %s, want %s", network, rcode(resp), dns.RcodeToString[tt.rcode])
					}
				}
			}
		})
	}
	if qs := e.stub.queries(); len(qs) != 0 {
		t.Errorf("forwarded %+v", qs)
	}
	for _, ev := range e.events.all() {
		if ev.Kind != EventRefused {
			t.Errorf("event %+v", ev)
		}
		for _, r := range ev.Name {
			if r < 0x20 || r > 0x7e {
				t.Errorf("event name %q is not printable", ev.Name)
			}
		}
		if len(ev.Name) > 90 {
			t.Errorf("event name %q is not bounded", ev.Name)
		}
	}
}

func TestGC(t *testing.T) {
	z := zone{
		"gc1.example.net. A": {"gc1.example.net. 60 IN A 203.0.113.21"},
		"gc2.example.net. A": {"gc2.example.net. 600 IN A 203.0.113.22"},
	}
	e := newEnv(t, z, nil)
	e.ask(t, "gc1.example.net.", dns.TypeA)
	e.ask(t, "gc2.example.net.", dns.TypeA)
	if n, err := e.r.GC(); n != 0 || err != nil || len(e.learner.forgotten()) != 0 {
		t.Fatalf("GC before expiry: %d, %v, forgot %v", n, err, e.learner.forgotten())
	}
	// Past gc1's expiry (TTL 60 s + grace 10 s), not gc2's.
	e.clock.Advance(71 * time.Second)
	n, err := e.r.GC()
	if n != 1 || err != nil {
		t.Errorf("GC: %d, %v; want 1", n, err)
	}
	if got := e.learner.forgotten(); !slices.Equal(got, []netip.Addr{mustAddr("203.0.113.21")}) {
		t.Errorf("forgot %v, want only 203.0.113.21", got)
	}
	if n := e.r.LearnedCount(); n != 1 {
		t.Errorf("LearnedCount %d, want 1", n)
	}
	// Asked again, it is learned again.
	before := len(e.learner.calls())
	e.ask(t, "gc1.example.net.", dns.TypeA)
	if len(e.learner.calls()) != before+1 {
		t.Errorf("an address forgotten by GC was not taught again")
	}
	e.clock.Advance(600 * time.Second)
	if n, _ := e.r.GC(); n != 2 {
		t.Errorf("second GC removed %d, want 2", n)
	}
	if n := e.r.LearnedCount(); n != 0 {
		t.Errorf("LearnedCount %d, want 0", n)
	}
}

func TestCloseIdempotent(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	e.ask(t, "api.example.com.", dns.TypeA)
	e.r.Close()
	e.r.Close()
	c := &dns.Client{Net: "tcp", Timeout: 500 * time.Millisecond}
	if _, _, err := c.Exchange(query("api.example.com.", dns.TypeA), e.addr4()); err == nil {
		t.Errorf("still answering after Close")
	}
}

// The cap counts a name's unexpired addresses across answers, and frees up
// as they expire.
func TestPerNameCapAcrossAnswers(t *testing.T) {
	z := zone{
		"rr.example.net. A":    {"rr.example.net. 60 IN A 203.0.113.41", "rr.example.net. 60 IN A 203.0.113.42"},
		"rr.example.net. AAAA": {"rr.example.net. 60 IN AAAA 2001:db8::43"},
	}
	e := newEnv(t, z, nil, func(c *Config) { c.MaxIPsPerName = 2 })
	if resp := e.ask(t, "rr.example.net.", dns.TypeA); resp.Rcode != dns.RcodeSuccess {
		t.Fatalf("A: rcode %s", rcode(resp))
	}
	if resp := e.ask(t, "rr.example.net.", dns.TypeAAAA); resp.Rcode != dns.RcodeServerFailure {
		t.Errorf("third address while two are live: rcode %s, want SERVFAIL", rcode(resp))
	}
	// The same addresses again are not new.
	e.clock.Advance(61 * time.Second) // past the cache, not past TTL+grace
	if resp := e.ask(t, "rr.example.net.", dns.TypeA); resp.Rcode != dns.RcodeSuccess {
		t.Errorf("A again: rcode %s", rcode(resp))
	}
	e.clock.Advance(2 * time.Minute) // all expired
	if resp := e.ask(t, "rr.example.net.", dns.TypeAAAA); resp.Rcode != dns.RcodeSuccess {
		t.Errorf("after expiry: rcode %s, want NOERROR", rcode(resp))
	}
	if n := len(e.events.of(EventCapReached)); n != 1 {
		t.Errorf("%d EventCapReached, want 1", n)
	}
}
