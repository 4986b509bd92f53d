// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func rrs(t testing.TB, texts ...string) []dns.RR {
	t.Helper()
	var out []dns.RR
	for _, s := range texts {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		out = append(out, rr)
	}
	return out
}

func answerMsg(t testing.TB, qname string, qtype uint16, answer ...string) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	m.Response = true
	m.Answer = rrs(t, answer...)
	return m
}

func learnedAddrs(l []Learned) []netip.Addr {
	var out []netip.Addr
	for _, x := range l {
		out = append(out, x.Addr)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

func owners(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		out = append(out, strings.ToLower(rr.Header().Name)+" "+dns.TypeToString[rr.Header().Rrtype])
	}
	return out
}

func addrList(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

func TestFilterAnswer(t *testing.T) {
	tests := []struct {
		name         string
		qname        string
		answer       []string
		allowPrivate bool
		wantLearn    []netip.Addr
		wantKept     []string // "owner TYPE", in order
		wantDropped  []netip.Addr
	}{
		{
			name:  "plain A",
			qname: "api.example.com.",
			answer: []string{
				"api.example.com. 300 IN A 203.0.113.5",
				"api.example.com. 300 IN A 203.0.113.6",
			},
			wantLearn: addrList("203.0.113.5", "203.0.113.6"),
			wantKept:  []string{"api.example.com. A", "api.example.com. A"},
		},
		{
			name:  "CNAME chain into another zone, unrelated owner removed",
			qname: "api.example.com.",
			answer: []string{
				"api.example.com. 300 IN CNAME edge.cdn.example.net.",
				"edge.cdn.example.net. 60 IN A 198.51.100.7",
				"evil.example.org. 60 IN A 203.0.113.66",
				"edge.cdn.example.net. 60 IN AAAA 2001:db8::7",
				"api.example.org. 60 IN AAAA 2001:db8::66",
			},
			wantLearn: addrList("198.51.100.7", "2001:db8::7"),
			wantKept:  []string{"api.example.com. CNAME", "edge.cdn.example.net. A", "edge.cdn.example.net. AAAA"},
		},
		{
			name:  "owner names compared without regard to case",
			qname: "api.example.com.",
			answer: []string{
				"API.Example.COM. 300 IN CNAME Edge.CDN.example.NET.",
				"EDGE.cdn.example.net. 60 IN A 198.51.100.7",
			},
			wantLearn: addrList("198.51.100.7"),
			wantKept:  []string{"api.example.com. CNAME", "edge.cdn.example.net. A"},
		},
		{
			name:  "CNAME loop terminates",
			qname: "a.example.net.",
			answer: []string{
				"a.example.net. 300 IN CNAME b.example.net.",
				"b.example.net. 300 IN CNAME a.example.net.",
				"b.example.net. 300 IN A 203.0.113.9",
			},
			wantLearn: addrList("203.0.113.9"),
			wantKept:  []string{"a.example.net. CNAME", "b.example.net. CNAME", "b.example.net. A"},
		},
		{
			name:  "self CNAME",
			qname: "a.example.net.",
			answer: []string{
				"a.example.net. 300 IN CNAME a.example.net.",
			},
			wantKept: []string{"a.example.net. CNAME"},
		},
		{
			name:  "CNAME not starting at the asked name is not followed",
			qname: "api.example.com.",
			answer: []string{
				"other.example.com. 300 IN CNAME api.example.com.",
				"other.example.com. 300 IN A 203.0.113.8",
				"api.example.com. 300 IN A 203.0.113.5",
			},
			wantLearn: addrList("203.0.113.5"),
			wantKept:  []string{"api.example.com. A"},
		},
		{
			name:  "only the first CNAME of an owner is followed",
			qname: "api.example.com.",
			answer: []string{
				"api.example.com. 300 IN CNAME one.example.net.",
				"api.example.com. 300 IN CNAME two.example.net.",
				"one.example.net. 300 IN A 203.0.113.1",
				"two.example.net. 300 IN A 203.0.113.2",
			},
			wantLearn: addrList("203.0.113.1"),
			wantKept:  []string{"api.example.com. CNAME", "api.example.com. CNAME", "one.example.net. A"},
		},
		{
			name:  "rebinding addresses dropped",
			qname: "api.example.com.",
			answer: []string{
				"api.example.com. 300 IN A 127.0.0.1",
				"api.example.com. 300 IN A 10.0.0.5",
				"api.example.com. 300 IN A 169.254.169.254",
				"api.example.com. 300 IN A 100.64.1.1",
				"api.example.com. 300 IN A 203.0.113.5",
				"api.example.com. 300 IN AAAA ::1",
				"api.example.com. 300 IN AAAA fd00::1",
				"api.example.com. 300 IN AAAA fe80::1",
				"api.example.com. 300 IN AAAA ::ffff:127.0.0.1",
				"api.example.com. 300 IN AAAA 64:ff9b::7f00:1",
				"api.example.com. 300 IN AAAA 2001:db8::5",
			},
			wantLearn:   addrList("203.0.113.5", "2001:db8::5"),
			wantKept:    []string{"api.example.com. A", "api.example.com. AAAA"},
			wantDropped: addrList("127.0.0.1", "10.0.0.5", "169.254.169.254", "100.64.1.1", "::1", "fd00::1", "fe80::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1"),
		},
		{
			name:         "rebinding addresses kept with allow_private",
			qname:        "x.example.",
			allowPrivate: true,
			answer: []string{
				"x.example. 300 IN A 10.0.0.5",
				"x.example. 300 IN AAAA fd00::1",
				"x.example. 300 IN AAAA ::ffff:127.0.0.1",
			},
			// A mapped address is learned as the IPv4 address it stands for.
			wantLearn: addrList("10.0.0.5", "fd00::1", "127.0.0.1"),
			wantKept:  []string{"x.example. A", "x.example. AAAA", "x.example. AAAA"},
		},
		{
			name:  "rebinding behind a CNAME is reported with its owner",
			qname: "api.example.com.",
			answer: []string{
				"api.example.com. 300 IN CNAME metadata.example.net.",
				"metadata.example.net. 300 IN A 169.254.169.254",
			},
			wantKept:    []string{"api.example.com. CNAME"},
			wantDropped: addrList("169.254.169.254"),
		},
		{
			name:  "other record types of chain names kept, of other names removed",
			qname: "api.example.com.",
			answer: []string{
				"api.example.com. 300 IN TXT \"hello\"",
				"api.example.com. 300 IN MX 10 mail.example.com.",
				"mail.example.com. 300 IN A 203.0.113.25",
			},
			wantKept: []string{"api.example.com. TXT", "api.example.com. MX"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := answerMsg(t, tt.qname, dns.TypeA, tt.answer...)
			learn, dropped := FilterAnswer(m, tt.qname, tt.allowPrivate)
			if got := learnedAddrs(learn); !slices.Equal(got, tt.wantLearn) {
				t.Errorf("learned %v, want %v", got, tt.wantLearn)
			}
			if got := owners(m); !slices.Equal(got, tt.wantKept) {
				t.Errorf("kept %v, want %v", got, tt.wantKept)
			}
			var gotDropped []netip.Addr
			for _, d := range dropped {
				gotDropped = append(gotDropped, d.Addr)
				if d.Why == "" || d.Name == "" {
					t.Errorf("dropped %+v without a name or reason", d)
				}
			}
			slices.SortFunc(gotDropped, func(a, b netip.Addr) int { return a.Compare(b) })
			if !slices.Equal(gotDropped, tt.wantDropped) {
				t.Errorf("dropped %v, want %v", gotDropped, tt.wantDropped)
			}
		})
	}
}

func TestFilterAnswerLongChain(t *testing.T) {
	// c0 -> c1 -> ... -> c40, each with an A record: the chain is followed
	// maxChain steps and no further.
	var answer []string
	for i := range 40 {
		answer = append(answer, fmt.Sprintf("c%d.example.net. 300 IN CNAME c%d.example.net.", i, i+1))
		answer = append(answer, fmt.Sprintf("c%d.example.net. 300 IN A 203.0.113.%d", i+1, i+1))
	}
	m := answerMsg(t, "c0.example.net.", dns.TypeA, answer...)
	learn, _ := FilterAnswer(m, "c0.example.net.", false)
	if len(learn) != maxChain {
		t.Fatalf("learned %d addresses, want %d (the chain bound)", len(learn), maxChain)
	}
	for _, l := range learn {
		if n := int(l.Addr.As4()[3]); n > maxChain {
			t.Errorf("learned %v, beyond the chain bound", l.Addr)
		}
	}
}

func TestFilterAnswerSections(t *testing.T) {
	m := answerMsg(t, "api.example.com.", dns.TypeA, "api.example.com. 300 IN A 203.0.113.5")
	m.Ns = rrs(t,
		"example.com. 300 IN NS ns1.example.com.",
		"example.com. 300 IN SOA ns1.example.com. hostmaster.example.com. 1 3600 600 86400 60",
	)
	m.Extra = rrs(t,
		"ns1.example.com. 300 IN A 203.0.113.53",
		"api.example.com. 300 IN AAAA 2001:db8::5",
	)
	m.SetEdns0(1232, true)
	learn, _ := FilterAnswer(m, "api.example.com.", false)
	if got := learnedAddrs(learn); !slices.Equal(got, addrList("203.0.113.5")) {
		t.Errorf("learned %v: glue and additional records must not be learned", got)
	}
	if len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA {
		t.Errorf("authority %v, want only the SOA", m.Ns)
	}
	if len(m.Extra) != 1 || m.Extra[0].Header().Rrtype != dns.TypeOPT {
		t.Errorf("additional %v, want only the OPT", m.Extra)
	}
}

func TestFilterAnswerStripsSVCBHints(t *testing.T) {
	m := answerMsg(t, "api.example.com.", dns.TypeHTTPS,
		"api.example.com. 300 IN HTTPS 1 . alpn=h2,h3 port=8443 ipv4hint=203.0.113.5,10.0.0.5 ipv6hint=2001:db8::5 ech=AEX+DQBBpQAgACCW2/dfOBZAtQU55/znnA==",
		"api.example.com. 300 IN SVCB 1 svc.example.net. mandatory=alpn,ech alpn=h2 ipv4hint=127.0.0.1 ech=AEX+DQBBpQAgACCW2/dfOBZAtQU55/znnA==",
		"unrelated.example.org. 300 IN HTTPS 1 . alpn=h2 ipv4hint=203.0.113.66",
	)
	learn, dropped := FilterAnswer(m, "api.example.com.", false)
	if svcb, ok := m.Answer[1].(*dns.SVCB); ok {
		for _, v := range svcb.Value {
			if mk, ok := v.(*dns.SVCBMandatory); ok && (len(mk.Code) != 1 || mk.Code[0] != dns.SVCB_ALPN) {
				t.Errorf("mandatory %v, want alpn alone", mk.Code)
			}
		}
	}
	if len(learn) != 0 || len(dropped) != 0 {
		t.Errorf("hints must be neither learned nor reported: learned %v, dropped %v", learn, dropped)
	}
	if len(m.Answer) != 2 {
		t.Fatalf("answer %v, want the HTTPS and SVCB records of api.example.com only", m.Answer)
	}
	for _, rr := range m.Answer {
		var kv []dns.SVCBKeyValue
		switch r := rr.(type) {
		case *dns.HTTPS:
			kv = r.Value
		case *dns.SVCB:
			kv = r.Value
		}
		keys := map[dns.SVCBKey]bool{}
		for _, v := range kv {
			keys[v.Key()] = true
		}
		if keys[dns.SVCB_IPV4HINT] || keys[dns.SVCB_IPV6HINT] {
			t.Errorf("%v still has address hints", rr)
		}
		if !keys[dns.SVCB_ALPN] {
			t.Errorf("%v lost its alpn", rr)
		}
		if _, ok := rr.(*dns.HTTPS); ok && !keys[dns.SVCB_PORT] {
			t.Errorf("%v lost its port", rr)
		}
		if keys[dns.SVCB_ECHCONFIG] {
			t.Errorf("%v still has an ECH config", rr)
		}
	}
	// The stripped records still pack.
	if _, err := m.Pack(); err != nil {
		t.Errorf("pack: %v", err)
	}
}

// An A or AAAA record with empty RDATA (legal on the wire: UnpackRR keeps
// it with a nil address) is not an address: it must never be learned, not
// even when the entry allows private addresses.
func TestFilterAnswerEmptyRdata(t *testing.T) {
	hdrA := dns.RR_Header{Name: "x.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}
	hdrAAAA := dns.RR_Header{Name: "x.example.", Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 300}
	m := new(dns.Msg)
	m.SetQuestion("x.example.", dns.TypeA)
	m.Response = true
	m.Answer = []dns.RR{&dns.A{Hdr: hdrA}, &dns.AAAA{Hdr: hdrAAAA}, &dns.A{Hdr: hdrA, A: netip.MustParseAddr("10.0.0.5").AsSlice()}}
	wire, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	for _, allowPrivate := range []bool{false, true} {
		got := new(dns.Msg)
		if err := got.Unpack(wire); err != nil {
			t.Fatal(err)
		}
		learn, _ := FilterAnswer(got, "x.example.", allowPrivate)
		for _, l := range learn {
			if !l.Addr.IsValid() {
				t.Errorf("allowPrivate=%v: learned an invalid address from empty RDATA", allowPrivate)
			}
		}
		for _, a := range answerAddrs(got) {
			if !a.IsValid() {
				t.Errorf("allowPrivate=%v: an A/AAAA record without an address stayed in the answer", allowPrivate)
			}
		}
		if allowPrivate && len(learn) != 1 {
			t.Errorf("allowPrivate: learned %v, want just 10.0.0.5", learn)
		}
	}
}
