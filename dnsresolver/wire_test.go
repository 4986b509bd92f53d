// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func packed(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatalf("pack: %v", err)
	}
	return b
}

func TestParseQuery(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("Api.Example.COM.", dns.TypeAAAA)
	m.Id = 0xbeef
	m.CheckingDisabled = true
	q, ok := parseQuery(packed(t, m))
	if !ok {
		t.Fatal("a plain query did not parse")
	}
	if q.id != 0xbeef || !q.rd || !q.cd || q.name != "api.example.com" || q.qtype != dns.TypeAAAA || q.qclass != dns.ClassINET || q.edns || q.limit != 512 {
		t.Errorf("parsed %+v", q)
	}
	if name, _, err := dns.UnpackDomainName(q.question, 0); err != nil || name != "Api.Example.COM." {
		t.Errorf("question bytes hold %q (%v), want the client's spelling", name, err)
	}

	m.SetEdns0(4096, true)
	q, ok = parseQuery(packed(t, m))
	if !ok || !q.edns || !q.do || q.limit != 4096 {
		t.Errorf("EDNS0 query: ok %v, %+v", ok, q)
	}
	m.IsEdns0().SetUDPSize(100)
	if q, ok = parseQuery(packed(t, m)); !ok || q.limit != 512 {
		t.Errorf("a buffer size under 512 must mean 512: %+v", q)
	}
}

func TestParseQueryLeavesUnusualShapes(t *testing.T) {
	base := func() *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("a.example.com.", dns.TypeA)
		return m
	}
	cases := map[string][]byte{}
	m := base()
	m.Response = true
	cases["a response"] = packed(t, m)
	m = base()
	m.Opcode = dns.OpcodeNotify
	cases["another opcode"] = packed(t, m)
	m = base()
	m.Question = append(m.Question, m.Question[0])
	cases["two questions"] = packed(t, m)
	m = base()
	m.Question[0].Name = "a\\000b.example.com."
	cases["a NUL in a label"] = packed(t, m)
	m = base()
	m.Question[0].Name = "."
	cases["the root"] = packed(t, m)
	m = base()
	m.SetEdns0(1232, false)
	m.IsEdns0().SetVersion(1)
	cases["EDNS version 1"] = packed(t, m)
	m = base()
	m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "a.example.com.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(1, 2, 3, 4)}}
	cases["an answer record"] = packed(t, m)
	b := packed(t, base())
	cases["trailing bytes"] = append(append([]byte(nil), b...), 0)
	cases["cut short"] = b[:len(b)-2]
	// A compression pointer in the question name.
	ptr := append([]byte(nil), b[:12]...)
	ptr = append(ptr, 0xc0, 12, 0, 1, 0, 1)
	cases["a compression pointer"] = ptr
	for what, b := range cases {
		if q, ok := parseQuery(b); ok {
			t.Errorf("%s: parsed as %+v; want the general path", what, q)
		}
	}
}

func TestAppendReplyMatchesTheGeneralPath(t *testing.T) {
	ans := new(dns.Msg)
	ans.SetQuestion("a.example.com.", dns.TypeA)
	ans.Response, ans.Authoritative, ans.Rcode = true, true, dns.RcodeSuccess
	ans.Answer = []dns.RR{
		&dns.CNAME{Hdr: dns.RR_Header{Name: "a.example.com.", Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 300}, Target: "b.example.com."},
		&dns.A{Hdr: dns.RR_Header{Name: "b.example.com.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(203, 0, 113, 7)},
	}
	ans.SetEdns0(1232, false)
	p, err := packAnswer(ans)
	if err != nil {
		t.Fatal(err)
	}
	req := new(dns.Msg)
	req.SetQuestion("A.Example.Com.", dns.TypeA)
	req.Id = 4242
	req.SetEdns0(1400, true)
	q, ok := parseQuery(packed(t, req))
	if !ok {
		t.Fatal("query did not parse")
	}
	b, ok := appendReply([]byte("prefix"), p, &q, 10)
	if !ok {
		t.Fatal("appendReply refused a small answer")
	}
	if string(b[:6]) != "prefix" {
		t.Fatal("appendReply overwrote what it appends to")
	}
	got := new(dns.Msg)
	if err := got.Unpack(b[6:]); err != nil {
		t.Fatalf("reply does not unpack: %v", err)
	}
	if got.Id != 4242 || !got.Response || !got.RecursionDesired || !got.RecursionAvailable || !got.Authoritative || got.Truncated {
		t.Errorf("header %+v", got.MsgHdr)
	}
	if got.Question[0].Name != "A.Example.Com." {
		t.Errorf("question %q, want the client's spelling", got.Question[0].Name)
	}
	if len(got.Answer) != 2 || got.Answer[0].Header().Ttl != 290 || got.Answer[1].Header().Ttl != 50 {
		t.Errorf("answer %v, want TTLs reduced by 10 s", got.Answer)
	}
	opt := got.IsEdns0()
	if opt == nil || !opt.Do() || opt.UDPSize() != upstreamUDPSize || len(got.Extra) != 1 {
		t.Errorf("extra %v, want sluice's one OPT with DO", got.Extra)
	}
	// Age past a TTL gives 0, never a wrapped-around TTL.
	b, _ = appendReply(nil, p, &q, 1000)
	if err := got.Unpack(b); err != nil || got.Answer[1].Header().Ttl != 0 {
		t.Errorf("aged past the TTL: %v (%v)", got.Answer, err)
	}
	// A reply larger than the client takes goes to the general path,
	// which truncates.
	big := new(dns.Msg)
	big.SetQuestion("a.example.com.", dns.TypeA)
	big.Response = true
	for i := range 40 {
		big.Answer = append(big.Answer, &dns.A{Hdr: dns.RR_Header{Name: "a.example.com.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(203, 0, 113, byte(i))})
	}
	p, err = packAnswer(big)
	if err != nil {
		t.Fatal(err)
	}
	req.Extra = nil
	q, _ = parseQuery(packed(t, req))
	if _, ok := appendReply(nil, p, &q, 0); ok {
		t.Error("a reply over 512 bytes was built for a client without EDNS0")
	}
}

func TestEmptyReplyAndUpstreamQuery(t *testing.T) {
	req := new(dns.Msg)
	req.SetQuestion("X.example.com.", dns.TypeMX)
	req.Id = 7
	req.CheckingDisabled = true
	req.SetEdns0(4096, true)
	q, ok := parseQuery(packed(t, req))
	if !ok {
		t.Fatal("query did not parse")
	}
	got := new(dns.Msg)
	if err := got.Unpack(appendEmptyReply(nil, &q, dns.RcodeServerFailure)); err != nil {
		t.Fatal(err)
	}
	if got.Id != 7 || got.Rcode != dns.RcodeServerFailure || !got.Response || !got.CheckingDisabled || got.Question[0].Name != "X.example.com." || got.IsEdns0() == nil {
		t.Errorf("SERVFAIL reply %v", got)
	}
	up := new(dns.Msg)
	if err := up.Unpack(appendUpstreamQuery([]byte("xx"), &q)[2:]); err != nil {
		t.Fatal(err)
	}
	if up.Response || !up.RecursionDesired || !up.CheckingDisabled || up.Question[0].Name != "x.example.com." || up.Question[0].Qtype != dns.TypeMX {
		t.Errorf("upstream query %v", up)
	}
	if opt := up.IsEdns0(); opt == nil || !opt.Do() || opt.UDPSize() != upstreamUDPSize {
		t.Errorf("upstream query's OPT %v", up.Extra)
	}
}

// FuzzParseQuery holds the fast parser to miekg/dns: whatever it accepts,
// miekg/dns reads the same way.
func FuzzParseQuery(f *testing.F) {
	for _, name := range []string{"a.example.com.", "A-b_c.Example.", "x."} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		f.Add(packed(f, m))
		m.SetEdns0(1232, true)
		f.Add(packed(f, m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, ok := parseQuery(b)
		if !ok {
			return
		}
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			t.Fatalf("parsed %+v, but miekg/dns says %v", q, err)
		}
		mq := m.Question[0]
		if strings.ToLower(strings.TrimSuffix(mq.Name, ".")) != q.name || mq.Qtype != q.qtype || mq.Qclass != q.qclass || m.Id != q.id || m.RecursionDesired != q.rd {
			t.Fatalf("parsed %+v, miekg/dns %v", q, m)
		}
		if opt := m.IsEdns0(); (opt != nil) != q.edns || (opt != nil && opt.Do() != q.do) {
			t.Fatalf("EDNS0: parsed %+v, miekg/dns %v", q, opt)
		}
	})
}

func TestLearnedGCVisitsWhatExpired(t *testing.T) {
	s := newLearnedSet()
	l := &fakeLearner{}
	a := netip.MustParseAddr("203.0.113.1")
	// Many names share one address, as names behind a CDN do.
	for i := range 1000 {
		name := "n" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + ".example.com"
		exp := time.Duration(10+i%20) * time.Second
		if err := s.learn(l, name+string(rune('0'+i%10)), 0, []netip.Addr{a}, []time.Duration{exp}, 64, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.gc(l, 5*time.Second); err != nil || s.size() != 1 {
		t.Fatalf("gc before any expiry: size %d, %v", s.size(), err)
	}
	removed, err := s.gc(l, 40*time.Second)
	if err != nil || removed != 1 || s.size() != 0 || len(s.perName) != 0 || len(s.wheel) != 0 {
		t.Errorf("gc after every expiry: removed %d, size %d, names %d, wheel %d, %v", removed, s.size(), len(s.perName), len(s.wheel), err)
	}
	if got := l.forgotten(); len(got) != 1 || got[0] != a {
		t.Errorf("forgotten %v, want %v", got, a)
	}
}

func TestLearnedGCKeepsWhatWasExtended(t *testing.T) {
	s := newLearnedSet()
	a := netip.MustParseAddr("203.0.113.2")
	_ = s.learn(nil, "a.example.com", 0, []netip.Addr{a}, []time.Duration{10 * time.Second}, 64, 0)
	_ = s.learn(nil, "b.example.com", 5*time.Second, []netip.Addr{a}, []time.Duration{30 * time.Second}, 64, 0)
	if _, err := s.gc(nil, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	names, _ := s.namesOf(a, 20*time.Second)
	if len(names) != 1 || names[0] != "b.example.com" {
		t.Errorf("names of %v at 20 s: %v, want only the name whose use is live", a, names)
	}
	if _, err := s.gc(nil, 31*time.Second); err != nil || s.size() != 0 {
		t.Errorf("after the extension expired: size %d, %v", s.size(), err)
	}
}

// The fast path's UDP client asks first: a truncated upstream answer is
// fetched again over TCP by the fast path itself, and an answer longer
// than sluice reads over UDP is treated as truncated.
func TestFastPathTruncatedAndOversizedAnswers(t *testing.T) {
	hooks := func(w dns.ResponseWriter, req *dns.Msg, tcp bool) bool {
		// huge.example.net: an upstream ignoring the EDNS0 size sluice
		// asked for, never setting TC.
		return bigAnswerHook(100)(w, req, tcp) || manyAnswersHook("huge.example.net.", 200, false)(w, req, tcp)
	}
	e := newEnv(t, nil, hooks, func(c *Config) { c.MaxIPsPerName = 250 })
	for name, n := range map[string]int{"big.example.net.": 100, "huge.example.net.": 200} {
		m := query(name, dns.TypeA)
		m.SetEdns0(65000, false)
		resp := exchange(t, "udp", e.addr4(), m)
		if resp.Truncated || len(resp.Answer) != n || resp.Rcode != dns.RcodeSuccess {
			t.Errorf("%s over UDP: %s, TC %v, %d answers, want %d", name, rcode(resp), resp.Truncated, len(resp.Answer), n)
		}
		tcp := false
		for _, q := range e.stub.queries() {
			tcp = tcp || (q.TCP && q.Name == name)
		}
		if !tcp {
			t.Errorf("%s: sluice did not ask over TCP", name)
		}
	}
	if got := len(e.learner.addrs()); got != 200 {
		t.Errorf("learned %d addresses, want 200", got)
	}
}

// wireAnswer packs an upstream answer to name/qtype with the given
// records, optionally compressed and with an OPT record.
func wireAnswer(t testing.TB, name string, qtype uint16, compress, opt bool, rrs ...dns.RR) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Response, m.RecursionAvailable = true, true
	m.Answer = rrs
	if opt {
		m.SetEdns0(1232, false)
	}
	m.Compress = compress
	return packed(t, m)
}

func aRR(name string, ttl uint32, ip string) dns.RR {
	a := netip.MustParseAddr(ip)
	if a.Is4() {
		return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: a.AsSlice()}
	}
	return &dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: a.AsSlice()}
}

func TestAcceptWireTakesOnlyTheCommonShape(t *testing.T) {
	q := wireQuery{name: "a.example.com", qtype: dns.TypeA, qclass: dns.ClassINET}
	cname := &dns.CNAME{Hdr: dns.RR_Header{Name: "a.example.com.", Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 60}, Target: "b.example.com."}
	cases := []struct {
		what string
		b    []byte
		ok   bool
	}{
		{"two A records, compressed, with OPT", wireAnswer(t, "a.example.com.", dns.TypeA, true, true, aRR("a.example.com.", 7200, "203.0.113.1"), aRR("a.example.com.", 30, "203.0.113.2")), true},
		{"uncompressed, other letter case", wireAnswer(t, "A.Example.com.", dns.TypeA, false, false, aRR("a.EXAMPLE.com.", 30, "203.0.113.1")), true},
		{"a CNAME chain", wireAnswer(t, "a.example.com.", dns.TypeA, true, false, cname, aRR("b.example.com.", 30, "203.0.113.1")), false},
		{"a rebinding address", wireAnswer(t, "a.example.com.", dns.TypeA, true, false, aRR("a.example.com.", 30, "10.0.0.1")), false},
		{"a record for another name", wireAnswer(t, "a.example.com.", dns.TypeA, true, false, aRR("c.example.com.", 30, "203.0.113.1")), false},
		{"another question", wireAnswer(t, "c.example.com.", dns.TypeA, true, false, aRR("c.example.com.", 30, "203.0.113.1")), false},
		{"no answer", wireAnswer(t, "a.example.com.", dns.TypeA, true, false), false},
	}
	for _, tc := range cases {
		ans, learn, minTTL, ok := acceptWire(tc.b, &q, 3600, false)
		if ok != tc.ok {
			t.Errorf("%s: ok %v, want %v", tc.what, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		got := new(dns.Msg)
		if err := got.Unpack(ans.wire); err != nil {
			t.Fatalf("%s: packed answer does not unpack: %v", tc.what, err)
		}
		if got.Id != 0 || len(got.Extra) != 0 || len(learn) != len(got.Answer) {
			t.Errorf("%s: %v, learn %v", tc.what, got, learn)
		}
		// The fast path can reply with it to the client's own question.
		req := new(dns.Msg)
		req.SetQuestion("A.example.COM.", dns.TypeA)
		cq, _ := parseQuery(packed(t, req))
		if _, ok := appendReply(nil, ans, &cq, 0); !ok {
			t.Errorf("%s: appendReply refused the accepted answer", tc.what)
		}
		for _, rr := range got.Answer {
			if rr.Header().Ttl > 3600 || rr.Header().Ttl < minTTL {
				t.Errorf("%s: TTL %d not clamped to 3600 or below the minimum %d", tc.what, rr.Header().Ttl, minTTL)
			}
		}
	}
	// A rebinding address is taken when the entry allows private ones.
	b := wireAnswer(t, "a.example.com.", dns.TypeA, true, false, aRR("a.example.com.", 30, "10.0.0.1"))
	if _, learn, _, ok := acceptWire(b, &q, 3600, true); !ok || len(learn) != 1 {
		t.Errorf("allow_private: ok %v, learn %v", ok, learn)
	}
}

// answerWithBadOption is an answer whose OPT record carries an EDNS
// Client Subnet option of an unknown address family, which miekg/dns
// refuses to unpack.
func answerWithBadOption(t testing.TB) []byte {
	m := new(dns.Msg)
	m.SetQuestion("a.example.com.", dns.TypeA)
	m.Response = true
	m.Answer = []dns.RR{aRR("a.example.com.", 30, "203.0.113.9")}
	m.SetEdns0(1232, false)
	opt := m.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: []byte{0, 7, 0, 0}})
	return packed(t, m)
}

// An OPT record miekg/dns refuses does not cost the records their answer:
// sluice replaces the upstream's OPT record anyway.
func TestAcceptWireIgnoresTheUpstreamsOptions(t *testing.T) {
	b := answerWithBadOption(t)
	if err := new(dns.Msg).Unpack(b); err == nil {
		t.Skip("this miekg/dns unpacks the option: nothing to show")
	}
	q := wireQuery{name: "a.example.com", qtype: dns.TypeA, qclass: dns.ClassINET}
	ans, learn, _, ok := acceptWire(b, &q, 3600, false)
	if !ok || len(learn) != 1 || learn[0].Addr != netip.MustParseAddr("203.0.113.9") {
		t.Fatalf("ok %v, learn %v", ok, learn)
	}
	if err := new(dns.Msg).Unpack(ans.wire); err != nil {
		t.Fatalf("the packed answer does not unpack: %v", err)
	}
}

// FuzzAcceptWire holds acceptWire to the general path: whatever it takes,
// miekg/dns and FilterAnswer read the same way (but for the OPT record,
// which sluice replaces), dropping nothing, and the packed answer holds the
// same records with the same clamped TTLs.
func FuzzAcceptWire(f *testing.F) {
	f.Add(wireAnswer(f, "a.example.com.", dns.TypeA, true, true, aRR("a.example.com.", 7200, "203.0.113.1"), aRR("a.example.com.", 30, "203.0.113.2")), false, false)
	f.Add(wireAnswer(f, "a.example.com.", dns.TypeAAAA, false, false, aRR("A.example.com.", 30, "2001:db8::1")), true, false)
	f.Add(wireAnswer(f, "a.example.com.", dns.TypeA, true, false, aRR("a.example.com.", 30, "127.0.0.1")), false, true)
	f.Add(answerWithBadOption(f), false, false)
	f.Fuzz(func(t *testing.T, b []byte, aaaa, allowPrivate bool) {
		q := wireQuery{name: "a.example.com", qtype: dns.TypeA, qclass: dns.ClassINET}
		if aaaa {
			q.qtype = dns.TypeAAAA
		}
		const maxTTL = 3600
		in := append([]byte(nil), b...)
		ans, learn, minTTL, ok := acceptWire(b, &q, maxTTL, allowPrivate)
		if string(in) != string(b) {
			t.Fatal("acceptWire modified its input")
		}
		if !ok {
			return
		}
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			// Only the OPT record, which sluice drops, may be what
			// miekg/dns refuses (options it judges malformed): the
			// records before it must read the same.
			b2 := append([]byte(nil), b[:len(ans.wire)]...)
			binary.BigEndian.PutUint16(b2[10:], 0)
			m = new(dns.Msg)
			if err2 := m.Unpack(b2); err2 != nil {
				t.Fatalf("accepted, but miekg/dns says %v (and %v without the OPT record)", err, err2)
			}
		}
		want, dropped := FilterAnswer(m, "a.example.com.", allowPrivate)
		if len(dropped) > 0 || len(m.Ns) > 0 || len(m.Extra) > 1 || m.Rcode != dns.RcodeSuccess || m.Truncated || len(want) != len(learn) {
			t.Fatalf("accepted an answer the general path changes: dropped %v, %v", dropped, m)
		}
		for i := range want {
			if want[i] != learn[i] {
				t.Fatalf("learn %v, general path %v", learn, want)
			}
		}
		got := new(dns.Msg)
		if err := got.Unpack(ans.wire); err != nil {
			t.Fatalf("packed answer does not unpack: %v", err)
		}
		if len(got.Answer) != len(m.Answer) || len(got.Extra) != 0 || got.Rcode != m.Rcode || got.Authoritative != m.Authoritative {
			t.Fatalf("packed %v, general path %v", got, m)
		}
		least := uint32(maxTTL)
		for i, rr := range m.Answer {
			rr.Header().Ttl = min(rr.Header().Ttl, maxTTL)
			least = min(least, rr.Header().Ttl)
			if got.Answer[i].String() != rr.String() {
				t.Fatalf("record %d: packed %v, general path %v", i, got.Answer[i], rr)
			}
		}
		if least != minTTL {
			t.Fatalf("minimum TTL %d, general path %d", minTTL, least)
		}
	})
}
