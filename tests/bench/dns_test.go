// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestAppendQuery(t *testing.T) {
	q := appendQuery(nil, 0x1234, "name07."+dnsZone)
	var m dns.Msg
	if err := m.Unpack(q); err != nil {
		t.Fatalf("unpack: %v", err)
	}
	if m.Id != 0x1234 || m.Response || !m.RecursionDesired || len(m.Question) != 1 || len(m.Extra) != 0 {
		t.Fatalf("got %v", &m)
	}
	if got := m.Question[0]; got.Name != "name07.bench.test." || got.Qtype != dns.TypeA || got.Qclass != dns.ClassINET {
		t.Fatalf("question %v", got)
	}

	setQueryID(q, 0xbeef)
	if err := m.Unpack(q); err != nil || m.Id != 0xbeef {
		t.Fatalf("after setQueryID: id %#x, %v", m.Id, err)
	}
}

func TestSetUniqueLabel(t *testing.T) {
	q := appendQuery(nil, 1, strings.Repeat("0", uniqueLabelLen)+"."+dnsZone)
	setUniqueLabel(q, 0x0123456789abcdef)
	var m dns.Msg
	if err := m.Unpack(q); err != nil {
		t.Fatalf("unpack: %v", err)
	}
	if got, want := m.Question[0].Name, "0123456789abcdef.bench.test."; got != want {
		t.Fatalf("name %q, want %q", got, want)
	}
	setUniqueLabel(q, 0xa)
	if err := m.Unpack(q); err != nil || m.Question[0].Name != "000000000000000a.bench.test." {
		t.Fatalf("name %q, %v", m.Question[0].Name, err)
	}
}

func TestCheckReply(t *testing.T) {
	req := new(dns.Msg)
	req.SetQuestion("x.bench.test.", dns.TypeA)
	req.Id = 7
	pack := func(m *dns.Msg) []byte {
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := new(dns.Msg)
	good.SetReply(req)
	good.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "x.bench.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: []byte{203, 0, 113, 1}}}
	empty := new(dns.Msg)
	empty.SetReply(req)
	servfail := new(dns.Msg)
	servfail.SetRcode(req, dns.RcodeServerFailure)

	for _, c := range []struct {
		name string
		b    []byte
		id   uint16
		want replyStatus
	}{
		{"answer", pack(good), 7, replyGood},
		{"other ID", pack(good), 8, replyOther},
		{"a query, not a reply", pack(req), 7, replyOther},
		{"short", []byte{0, 7, 0x80}, 7, replyOther},
		{"no answer", pack(empty), 7, replyFailed},
		{"SERVFAIL", pack(servfail), 7, replyFailed},
	} {
		if got := checkReply(c.b, c.id); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	var xs []time.Duration
	for i := 1; i <= 100; i++ {
		xs = append(xs, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {99, 99}, {100, 100}, {0.001, 1}} {
		if got := percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("empty: %v", got)
	}
	if got := percentile([]time.Duration{5}, 99); got != 5 {
		t.Errorf("one sample: %v", got)
	}
}

func TestStubAddr(t *testing.T) {
	seen := map[[4]byte]bool{}
	for i := range 2000 {
		a := stubAddr(strings.Repeat("x", i%7) + string(rune('a'+i%26)) + ".bench.test.")
		if a[0] != 203 || a[1] != 0 || a[2] != 113 || a[3] == 0 || a[3] == 255 {
			t.Fatalf("%v is not a host in 203.0.113.0/24", a)
		}
		seen[a] = true
	}
	if len(seen) < 50 {
		t.Errorf("only %d distinct addresses", len(seen))
	}
	if stubAddr("A.bench.test.") != stubAddr("a.bench.test.") {
		t.Error("the address depends on letter case")
	}
}

func TestInZone(t *testing.T) {
	for name, want := range map[string]bool{
		"x.bench.test.":    true,
		"a.b.BENCH.Test.":  true,
		"bench.test.":      false,
		"xbench.test.":     false,
		"x.bench.test.org": false,
	} {
		if got := inZone(name); got != want {
			t.Errorf("inZone(%q) = %v", name, got)
		}
	}
}

func TestQPSRow(t *testing.T) {
	var s series
	s.add(100_000, 70_000)
	s.add(100_000, 50_000)
	s.add(100_000, 65_000)
	r := qpsRow("x", &s, 0.6)
	if r.a != "100.0k qps" || r.b != "65.0k qps" || r.result != "ok" || r.target != "≥ 0.60" || !strings.HasPrefix(r.cmp, "0.650 (0.500–0.700)") {
		t.Errorf("row %+v", r)
	}
	if r := qpsRow("x", &s, 0.7); r.result == "ok" {
		t.Errorf("0.65 passed a 0.7 minimum: %+v", r)
	}
}

func TestLatencyRow(t *testing.T) {
	row := func(a, b time.Duration) tableRow {
		var s series
		s.add(float64(a), float64(b))
		return latencyRow("x", &s, time.Millisecond)
	}
	if r := row(200*time.Microsecond, 700*time.Microsecond); r.result != "ok" {
		t.Errorf("+0.5 ms: %+v", r)
	}
	if r := row(200*time.Microsecond, 2*time.Millisecond); r.result == "ok" {
		t.Errorf("+1.8 ms: %+v", r)
	}
	// Both arms overloaded: the difference is 0, which must not pass.
	if r := row(dnsQueryTimeout, dnsQueryTimeout); r.result == "ok" || !strings.Contains(r.cmp, "B overloaded") {
		t.Errorf("both overloaded: %+v", r)
	}
	if r := row(dnsQueryTimeout, time.Millisecond); r.result == "ok" || !strings.Contains(r.cmp, "A overloaded") {
		t.Errorf("direct overloaded: %+v", r)
	}
	var s series
	s.add(float64(time.Millisecond), float64(dnsQueryTimeout))
	if r := latencyRow("x", &s, 0); r.result != "report only" || r.target != "—" || !strings.Contains(r.b, "lost") {
		t.Errorf("report only, overloaded: %+v", r)
	}
}
