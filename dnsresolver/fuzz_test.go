// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/addrclass"
)

// packMsg builds a packed upstream answer for seeds.
func packMsg(tb testing.TB, qname string, qtype uint16, answer, ns, extra []string) []byte {
	tb.Helper()
	m := new(dns.Msg)
	if qname != "" {
		m.SetQuestion(qname, qtype)
	}
	m.Response = true
	m.Answer = rrs(tb, answer...)
	m.Ns = rrs(tb, ns...)
	m.Extra = rrs(tb, extra...)
	b, err := m.Pack()
	if err != nil {
		tb.Fatalf("pack seed: %v", err)
	}
	return b
}

func filterSeeds(tb testing.TB) [][]byte {
	seeds := [][]byte{
		packMsg(tb, "api.example.com.", dns.TypeA, []string{"api.example.com. 300 IN A 203.0.113.5"}, nil, nil),
		// CNAME chain into another zone, with an unrelated owner.
		packMsg(tb, "api.example.com.", dns.TypeA, []string{
			"api.example.com. 300 IN CNAME edge.cdn.example.net.",
			"edge.cdn.example.net. 60 IN A 198.51.100.7",
			"evil.example.org. 60 IN A 203.0.113.66",
		}, nil, nil),
		// CNAME loop.
		packMsg(tb, "a.example.net.", dns.TypeA, []string{
			"a.example.net. 300 IN CNAME b.example.net.",
			"b.example.net. 300 IN CNAME a.example.net.",
			"b.example.net. 300 IN A 203.0.113.9",
		}, nil, nil),
		// Mismatched owner names only.
		packMsg(tb, "api.example.com.", dns.TypeA, []string{
			"api.example.org. 300 IN A 203.0.113.66",
			"example.com. 300 IN A 203.0.113.67",
			"x.api.example.com. 300 IN AAAA 2001:db8::66",
		}, nil, nil),
		// Rebinding addresses, some mapped or embedded.
		packMsg(tb, "api.example.com.", dns.TypeAAAA, []string{
			"api.example.com. 300 IN A 127.0.0.1",
			"api.example.com. 300 IN A 169.254.169.254",
			"api.example.com. 300 IN AAAA ::ffff:10.0.0.5",
			"api.example.com. 300 IN AAAA 64:ff9b::7f00:1",
			"api.example.com. 300 IN AAAA ::ffff:203.0.113.5",
			"api.example.com. 300 IN AAAA 2001:db8::1",
		}, nil, nil),
		// HTTPS with hints.
		packMsg(tb, "api.example.com.", dns.TypeHTTPS, []string{
			"api.example.com. 300 IN HTTPS 1 . alpn=h2 ipv4hint=203.0.113.5 ipv6hint=2001:db8::5",
			"api.example.com. 300 IN SVCB 1 . ipv4hint=10.0.0.5",
		}, nil, nil),
		// Referral with glue and an OPT.
		packMsg(tb, "api.example.com.", dns.TypeA, nil,
			[]string{"example.com. 300 IN NS ns1.example.com.", "example.com. 300 IN SOA ns1.example.com. h.example.com. 1 2 3 4 5"},
			[]string{"ns1.example.com. 300 IN A 203.0.113.53", ". 0 CLASS1232 OPT"}),
		// No question: the fixed name is used.
		packMsg(tb, "", 0, []string{"api.example.com. 300 IN A 203.0.113.5"}, nil, nil),
		// Compression pointer loops (Unpack refuses them).
		{0x12, 0x34, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1},
		{0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0, 3, 'a', 'p', 'i', 0, 0, 1, 0, 1, 0xc0, 0x17, 0xc0, 0x15, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 203, 0, 113, 5},
		// An A record with empty RDATA.
		{0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0, 1, 'x', 0, 0, 1, 0, 1, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 0},
	}
	// A huge RR set, and a long chain.
	var huge []string
	for i := range 1000 {
		huge = append(huge, fmt.Sprintf("api.example.com. 300 IN A %d.%d.%d.%d", []int{203, 10, 127, 198}[i%4], i/256%256, i%256, 7))
	}
	seeds = append(seeds, packMsg(tb, "api.example.com.", dns.TypeA, huge, nil, nil))
	var chain []string
	for i := range 40 {
		chain = append(chain, fmt.Sprintf("c%d.example.net. 300 IN CNAME c%d.example.net.", i, i+1), fmt.Sprintf("c%d.example.net. 300 IN A 203.0.113.%d", i+1, i+1))
	}
	seeds = append(seeds, packMsg(tb, "c0.example.net.", dns.TypeA, chain, nil, nil))
	return seeds
}

// reachable is qname and every name reachable from it through the CNAMEs
// of answer (lower case, fully qualified).
func reachable(answer []dns.RR, qname string) map[string]bool {
	seen := map[string]bool{qname: true}
	todo := []string{qname}
	for len(todo) > 0 {
		cur := todo[0]
		todo = todo[1:]
		for _, rr := range answer {
			if c, ok := rr.(*dns.CNAME); ok && strings.ToLower(c.Hdr.Name) == cur {
				next := strings.ToLower(dns.Fqdn(c.Target))
				if !seen[next] {
					seen[next] = true
					todo = append(todo, next)
				}
			}
		}
	}
	return seen
}

func FuzzFilterAnswer(f *testing.F) {
	for _, s := range filterSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkFilterAnswer)
}

// checkFilterAnswer is FuzzFilterAnswer's body: data is an upstream answer.
func checkFilterAnswer(t *testing.T, data []byte) {
	orig := new(dns.Msg)
	if orig.Unpack(data) != nil {
		return
	}
	qname := "api.example.com."
	if len(orig.Question) > 0 {
		qname = strings.ToLower(dns.Fqdn(orig.Question[0].Name))
	}
	// Addresses of the original answer, unmapped.
	answered := map[netip.Addr]bool{}
	for _, a := range answerAddrs(orig) {
		answered[a.Unmap()] = true
	}
	_, origPackErr := orig.Copy().Pack()

	for _, allowPrivate := range []bool{false, true} {
		m := orig.Copy()
		learn, dropped := FilterAnswer(m, qname, allowPrivate)
		for _, l := range learn {
			if !l.Addr.IsValid() || l.Addr.Is4In6() || l.Addr.Zone() != "" {
				t.Fatalf("allowPrivate=%v: learned %v", allowPrivate, l.Addr)
			}
			if why, bad := addrclass.Rebinding(l.Addr); bad && !allowPrivate {
				t.Fatalf("learned rebinding address %v (%s)", l.Addr, why)
			}
			if !answered[l.Addr] {
				t.Fatalf("learned %v, which is not in the answer", l.Addr)
			}
		}
		for _, d := range dropped {
			if _, bad := addrclass.Rebinding(d.Addr); !bad {
				t.Fatalf("dropped the good address %v", d.Addr)
			}
			if allowPrivate && d.Addr.IsValid() {
				t.Fatalf("allowPrivate: dropped %v", d.Addr)
			}
		}
		reach := reachable(m.Answer, qname)
		addrs := 0
		for _, rr := range m.Answer {
			owner := strings.ToLower(rr.Header().Name)
			if !reach[owner] {
				t.Fatalf("kept %v: its owner is not reachable from %s", rr, qname)
			}
			var kv []dns.SVCBKeyValue
			switch r := rr.(type) {
			case *dns.A, *dns.AAAA:
				addrs++
			case *dns.SVCB:
				kv = r.Value
			case *dns.HTTPS:
				kv = r.Value
			}
			for _, v := range kv {
				if k := v.Key(); k == dns.SVCB_IPV4HINT || k == dns.SVCB_IPV6HINT {
					t.Fatalf("kept an address hint in %v", rr)
				}
			}
		}
		if addrs != len(learn) {
			t.Fatalf("%d A/AAAA records kept, %d addresses learned", addrs, len(learn))
		}
		for _, rr := range m.Ns {
			if _, ok := rr.(*dns.SOA); !ok {
				t.Fatalf("kept %v in the authority section", rr)
			}
		}
		for _, rr := range m.Extra {
			if _, ok := rr.(*dns.OPT); !ok {
				t.Fatalf("kept %v in the additional section", rr)
			}
		}
		if origPackErr == nil {
			if _, err := m.Pack(); err != nil {
				t.Fatalf("filtered answer does not pack: %v", err)
			}
		}
	}
}

// fuzzUpstreamHook answers every query the zone does not: A and AAAA with
// public and rebinding addresses, HTTPS with hints, others empty.
func fuzzUpstreamHook(w dns.ResponseWriter, req *dns.Msg, tcp bool) bool {
	if len(req.Question) != 1 {
		return false
	}
	q := req.Question[0]
	m := new(dns.Msg)
	m.SetReply(req)
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: q.Name, Rrtype: t, Class: dns.ClassINET, Ttl: uint32(len(q.Name) * 7)}
	}
	switch {
	case strings.HasPrefix(q.Name, "nx"):
		m.Rcode = dns.RcodeNameError
	case strings.HasPrefix(q.Name, "fail"):
		m.Rcode = dns.RcodeServerFailure
	case strings.HasPrefix(q.Name, "big") && !tcp:
		m.Truncated = true
	case q.Qtype == dns.TypeA:
		m.Answer = append(m.Answer,
			&dns.A{Hdr: hdr(dns.TypeA), A: net.IPv4(203, 0, 113, byte(len(q.Name)))},
			&dns.A{Hdr: hdr(dns.TypeA), A: net.IPv4(10, 0, 0, 5)})
	case q.Qtype == dns.TypeAAAA:
		m.Answer = append(m.Answer,
			&dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: net.ParseIP(fmt.Sprintf("2001:db8::%x", len(q.Name)))},
			&dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: net.ParseIP("::ffff:127.0.0.1")})
	case q.Qtype == dns.TypeHTTPS:
		m.Answer = append(m.Answer, &dns.HTTPS{SVCB: dns.SVCB{Hdr: hdr(dns.TypeHTTPS), Priority: 1, Target: ".", Value: []dns.SVCBKeyValue{
			&dns.SVCBAlpn{Alpn: []string{"h2"}},
			&dns.SVCBIPv4Hint{Hint: []net.IP{net.IPv4(203, 0, 113, 5)}},
		}}})
	}
	_ = w.WriteMsg(m)
	return true
}

// nopLearner accepts everything and remembers nothing (a fuzz run is long).
type nopLearner struct{}

func (nopLearner) Learn(netip.Addr, time.Duration) error { return nil }
func (nopLearner) Forget(netip.Addr) error               { return nil }

func FuzzResolve(f *testing.F) {
	z := zone{
		"loop.example.net. A": {
			"loop.example.net. 300 IN CNAME loop2.example.net.",
			"loop2.example.net. 300 IN CNAME loop.example.net.",
		},
		"api.example.com. A": {
			"api.example.com. 300 IN CNAME edge.cdn.example.net.",
			"edge.cdn.example.net. 60 IN A 198.51.100.7",
			"evil.example.org. 60 IN A 203.0.113.66",
		},
	}
	var huge []string
	for i := range 200 {
		huge = append(huge, fmt.Sprintf("many.example.net. 300 IN A 198.51.100.%d", i))
	}
	z["many.example.net. A"] = huge
	inZone := map[string]bool{}
	for k := range z {
		inZone[strings.ToLower(k)] = true
	}
	st := startStub(f, z, func(w dns.ResponseWriter, req *dns.Msg, tcp bool) bool {
		if len(req.Question) == 1 && inZone[strings.ToLower(req.Question[0].Name+" "+dns.TypeToString[req.Question[0].Qtype])] {
			return false
		}
		return fuzzUpstreamHook(w, req, tcp)
	})
	r, err := New(Config{
		Policy:    testPolicy(f),
		Upstreams: []string{st.addr},
		Learner:   nopLearner{},
		Timeout:   500 * time.Millisecond,
		CacheSize: 100,
		OnEvent:   func(Event) {},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(r.Close)

	add := func(m *dns.Msg) {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, name := range []string{"api.example.com.", "x.example.net.", "loop.example.net.", "many.example.net.", "nx.example.net.",
		"fail.example.net.", "big.example.net.", "a.private.example.net.", "x.example.", "localhost.", "foo.localhost.",
		"evil.example.org.", "example.net.", "5.113.0.203.in-addr.arpa.", "a\\000b.example.net."} {
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeHTTPS, dns.TypePTR, dns.TypeTXT} {
			add(query(name, qtype))
		}
	}
	m := query("API.EXAMPLE.com.", dns.TypeA)
	m.SetEdns0(1232, true)
	add(m)
	m = query("api.example.com.", dns.TypeA)
	m.Question = append(m.Question, m.Question[0])
	add(m)
	m = query("api.example.com.", dns.TypeA)
	m.Opcode = dns.OpcodeNotify
	add(m)
	m = query("api.example.com.", dns.TypeA)
	m.Question[0].Qclass = dns.ClassCHAOS
	add(m)
	m = query("api.example.com.", dns.TypeA)
	m.Question = nil
	add(m)

	client := netip.MustParseAddrPort("127.0.0.1:5353")
	f.Fuzz(func(t *testing.T, data []byte) {
		req := new(dns.Msg)
		if req.Unpack(data) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		resp := r.Resolve(ctx, req, client)
		if resp == nil {
			t.Fatal("nil reply")
		}
		if resp.Id != req.Id || !resp.Response {
			t.Fatalf("reply ID %d QR %v to query %d", resp.Id, resp.Response, req.Id)
		}
		if _, err := req.Pack(); err == nil {
			if _, err := resp.Pack(); err != nil {
				t.Fatalf("reply does not pack: %v\n%v", err, resp)
			}
		}
		for _, a := range answerAddrs(resp) {
			if !a.IsValid() {
				t.Fatalf("invalid address in %v", resp)
			}
		}
	})
}
