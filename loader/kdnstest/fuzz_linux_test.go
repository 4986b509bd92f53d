// SPDX-License-Identifier: Apache-2.0

//go:build linux

package kdnstest

import (
	"encoding/binary"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/dnsresolver"
)

// testSession is KDNS_TEST_SESSION of bpf/kdns_test.c.
const testSession = 0x8000000000006b64

var (
	upstream = netip.MustParseAddr("203.0.113.53")
	client   = netip.MustParseAddr("198.51.100.7")
)

const (
	// maxData is the largest DNS message a test run carries: the kernel
	// refuses skb test data beyond about a page, headers and headroom
	// included (the ingress judge hands anything over 2,048 bytes to user
	// space anyway).
	maxData = 3000
	maxTTL  = 3600
	grace   = 10
	maxIPs  = 8
)

var (
	loadOnce sync.Once
	objs     kdnstestObjects
	loadErr  error
)

// load loads the test object once per process, its maps unpinned, with a
// session that allows allowed.test, *.wild.test and xn--bcher-kva.test
// (bücher.test).
func load(t testing.TB) *kdnstestObjects {
	if os.Geteuid() != 0 {
		t.Skip("loading BPF programs needs root")
	}
	loadOnce.Do(func() {
		spec, err := loadKdnstest()
		if err != nil {
			loadErr = err
			return
		}
		for _, m := range spec.Maps {
			m.Pinning = ebpf.PinNone
		}
		if loadErr = spec.LoadAndAssign(&objs, nil); loadErr != nil {
			return
		}
		s := kdnstestKdnsSession{Flags: 1, Up4: binary.NativeEndian.Uint32(upstream.AsSlice()),
			Port4: htons(53), MinTtl: 5, MaxTtl: maxTTL, Grace: grace, MaxIps: maxIPs}
		if loadErr = objs.KdnsSessions.Put(uint64(testSession), &s); loadErr != nil {
			return
		}
		for name, flags := range map[string]uint32{"allowed.test": 1, "wild.test": 2, "xn--bcher-kva.test": 1} {
			w := wire(name)
			k := kdnstestKdnsNameKey{Session: testSession, Hash: hash(w)}
			v := kdnstestKdnsName{Flags: flags, Len: uint32(len(w))}
			copy(v.Name[:], w)
			if loadErr = objs.KdnsNames.Put(&k, &v); loadErr != nil {
				return
			}
		}
	})
	if loadErr != nil {
		t.Fatalf("load the kernel DNS test programs: %v", loadErr)
	}
	return &objs
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

func wire(name string) []byte {
	var b []byte
	for _, l := range strings.Split(name, ".") {
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	return append(b, 0)
}

// hash is loader.kdnsHash: FNV-1a from the last byte to the first.
func hash(w []byte) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := len(w) - 1; i >= 0; i-- {
		h = (h ^ uint64(w[i])) * 0x100000001b3
	}
	return h
}

// packet is an Ethernet frame (BPF_PROG_TEST_RUN strips its header) with an
// IPv4 UDP datagram carrying payload.
func packet(src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	b := make([]byte, 14+20+8+len(payload))
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	ip[8] = 64
	ip[9] = unix.IPPROTO_UDP
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:], s4[:])
	copy(ip[16:], d4[:])
	u := ip[20:]
	binary.BigEndian.PutUint16(u, sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	copy(u[8:], payload)
	return b
}

func clearLearned(t *testing.T, o *kdnstestObjects) {
	var k kdnstestLearnedKey
	var v kdnstestLearnedValue
	var keys []kdnstestLearnedKey
	it := o.Learned.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	for i := range keys {
		_ = o.Learned.Delete(&keys[i])
	}
}

func learned(t *testing.T, o *kdnstestObjects) map[netip.Addr]uint64 {
	out := map[netip.Addr]uint64{}
	var k kdnstestLearnedKey
	var v kdnstestLearnedValue
	it := o.Learned.Iterate()
	for it.Next(&k, &v) {
		if k.Session != testSession {
			t.Fatalf("learned for session %#x", k.Session)
		}
		out[netip.AddrFrom16(k.Addr).Unmap()] = v.Expires
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func bootNS() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return uint64(ts.Nano())
}

func answer(tb testing.TB, qname string, qtype uint16, rrs []string, ns []string, compress bool) []byte {
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	m.Id = 0x1234
	m.Response = true
	m.Compress = compress
	for _, list := range []struct {
		in  []string
		out *[]dns.RR
	}{{rrs, &m.Answer}, {ns, &m.Ns}} {
		for _, s := range list.in {
			rr, err := dns.NewRR(s)
			if err != nil {
				tb.Fatal(err)
			}
			*list.out = append(*list.out, rr)
		}
	}
	b, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzKDNSAnswer feeds hostile answers to the ingress judge, as answers to
// a recorded A query for allowed.test, and holds what it learned to the
// resolver's filter: the kernel may learn less (it hands what it cannot
// judge to user space), never an address the resolver would not learn.
// Without a recorded query, nothing passes and nothing is learned.
func FuzzKDNSAnswer(f *testing.F) {
	q := "allowed.test."
	seeds := [][]byte{
		answer(f, q, dns.TypeA, []string{q + " 300 IN A 203.0.113.5"}, nil, false),
		answer(f, q, dns.TypeA, []string{q + " 300 IN A 203.0.113.5", q + " 300 IN A 203.0.113.6"}, nil, true),
		answer(f, "AlLoWed.TEST.", dns.TypeA, []string{"allowed.test. 300 IN A 203.0.113.5"}, nil, true),
		answer(f, q, dns.TypeA, []string{q + " 300 IN CNAME edge.cdn.example.net.", "edge.cdn.example.net. 60 IN A 198.51.100.7"}, nil, true),
		answer(f, q, dns.TypeA, []string{q + " 300 IN CNAME a.example.net.", "a.example.net. 300 IN CNAME b.example.net.", "b.example.net. 30 IN A 203.0.113.9"}, nil, false),
		answer(f, q, dns.TypeA, []string{q + " 300 IN CNAME edge.example.net.", "evil.example.org. 60 IN A 203.0.113.66"}, nil, true),
		answer(f, q, dns.TypeA, []string{q + " 300 IN A 127.0.0.1"}, nil, true),
		answer(f, q, dns.TypeA, []string{q + " 300 IN A 169.254.169.254"}, nil, true),
		answer(f, q, dns.TypeA, []string{q + " 300 IN AAAA ::ffff:10.0.0.5", q + " 300 IN AAAA 2001:db8::5"}, nil, true),
		answer(f, q, dns.TypeA, []string{q + " 86400 IN A 203.0.113.5"}, nil, true),
		answer(f, q, dns.TypeA, nil, []string{"test. 300 IN SOA ns.test. host.test. 1 2 3 4 5"}, true),
		answer(f, q, dns.TypeA, []string{q + " 300 IN TXT hello"}, nil, true),
		{0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0, 7, 'a', 'l', 'l', 'o', 'w', 'e', 'd', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 1, 0, 0, 4, 203, 0, 113, 7},
		{0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 1, 0, 0, 4, 203, 0, 113, 7},
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o := load(t)
		if len(data) > maxData {
			return // BPF_PROG_TEST_RUN takes a page at most
		}
		clearLearned(t, o)
		var id uint16
		if len(data) >= 2 {
			id = binary.BigEndian.Uint16(data)
		}
		key := kdnstestKdnsQueryKey{Cookie: 0, Id: uint32(id)}
		rec := kdnstestKdnsQuery{Session: testSession, Uport: htons(53), State: 1, Qtype: dns.TypeA}
		mapped := netip.AddrFrom16(upstream.As16()).As16()
		for i := range rec.Upstream {
			rec.Upstream[i] = binary.NativeEndian.Uint32(mapped[i*4:])
		}
		w := wire("allowed.test")
		rec.NameLen = uint16(len(w))
		copy(rec.Name[:], w)
		pkt := packet(upstream, client, 53, 40000, data)

		// No recorded query: dropped, nothing learned.
		_ = o.KdnsQueries.Delete(&key)
		ret, err := o.KdnsTestIngress.Run(&ebpf.RunOptions{Data: pkt})
		if err != nil {
			t.Fatal(err)
		}
		if ret != 0 || len(learned(t, o)) != 0 {
			t.Fatalf("an answer nobody asked for: verdict %d, learned %v", ret, learned(t, o))
		}

		if err := o.KdnsQueries.Put(&key, &rec); err != nil {
			t.Fatal(err)
		}
		before := bootNS()
		ret, err = o.KdnsTestIngress.Run(&ebpf.RunOptions{Data: pkt})
		if err != nil {
			t.Fatal(err)
		}
		got := learned(t, o)
		if ret != 0 && ret != 1 {
			t.Fatalf("verdict %d", ret)
		}
		if ret == 0 {
			return // dropped (and handed to user space, or malformed)
		}
		if len(got) > maxIPs {
			t.Fatalf("learned %d addresses over a cap of %d", len(got), maxIPs)
		}
		m := new(dns.Msg)
		if m.Unpack(data) != nil {
			if len(got) > 0 {
				t.Fatalf("learned %v from a message miekg/dns rejects", got)
			}
			return
		}
		want := map[netip.Addr]bool{}
		learn, _ := dnsresolver.FilterAnswer(m.Copy(), q, false)
		for _, l := range learn {
			want[l.Addr.Unmap()] = true
		}
		limit := bootNS() + uint64((maxTTL+grace)*time.Second)
		for a, exp := range got {
			if !want[a] {
				t.Fatalf("the kernel learned %v, which the resolver's filter would not (it learns %v)", a, learn)
			}
			if exp < before || exp > limit {
				t.Fatalf("%v expires at %d, want within [%d, %d]", a, exp, before, limit)
			}
		}
	})
}

// FuzzKDNSQuery feeds hostile queries to the egress judge: it may pass
// (and record) only a canonical query for an allowed name, and hands
// everything else to user space (return 2: dropped quietly).
func FuzzKDNSQuery(f *testing.F) {
	q := func(name string, qtype uint16, edns bool) []byte {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		if edns {
			m.SetEdns0(1232, false)
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	for _, s := range [][]byte{
		q("allowed.test.", dns.TypeA, false),
		q("AllOwed.Test.", dns.TypeAAAA, true),
		q("a.b.wild.test.", dns.TypeA, true),
		q("wild.test.", dns.TypeA, false),
		q("denied.test.", dns.TypeA, false),
		q("allowed.test.", dns.TypeTXT, false),
		q("x.allowed.test.", dns.TypeA, false),
		append(q("allowed.test.", dns.TypeA, false), 0),
		q("a_b-c.wild.test.", dns.TypeA, false),
		q("a\\.b.wild.test.", dns.TypeA, false),
		q("a\\000b.wild.test.", dns.TypeA, false),
		q("-a.wild.test.", dns.TypeA, false),
		q("xn--bcher-kva.wild.test.", dns.TypeA, false),
		q("xn--a.wild.test.", dns.TypeA, false),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o := load(t)
		if len(data) > maxData {
			return // BPF_PROG_TEST_RUN takes a page at most
		}
		var id uint16
		if len(data) >= 2 {
			id = binary.BigEndian.Uint16(data)
		}
		key := kdnstestKdnsQueryKey{Cookie: 0, Id: uint32(id)}
		_ = o.KdnsQueries.Delete(&key)
		ret, err := o.KdnsTestEgress.Run(&ebpf.RunOptions{Data: packet(client, upstream, 40000, 53, data)})
		if err != nil {
			t.Fatal(err)
		}
		if ret != 1 && ret != 2 {
			t.Fatalf("verdict %d", ret)
		}
		if ret != 1 {
			return
		}
		var rec kdnstestKdnsQuery
		if err := o.KdnsQueries.Lookup(&key, &rec); err != nil || rec.State != 1 {
			t.Fatalf("passed without a kernel record: %v, state %d", err, rec.State)
		}
		m := new(dns.Msg)
		if err := m.Unpack(data); err != nil {
			t.Fatalf("passed a query miekg/dns rejects: %v", err)
		}
		if m.Response || m.Opcode != dns.OpcodeQuery || len(m.Question) != 1 || len(m.Answer) != 0 || len(m.Ns) != 0 || len(m.Extra) > 1 {
			t.Fatalf("passed a query that is not canonical: %v", m)
		}
		qq := m.Question[0]
		name := strings.ToLower(qq.Name)
		if qq.Qclass != dns.ClassINET || (qq.Qtype != dns.TypeA && qq.Qtype != dns.TypeAAAA) {
			t.Fatalf("passed class %d type %d", qq.Qclass, qq.Qtype)
		}
		if name != "allowed.test." && name != "xn--bcher-kva.test." && !strings.HasSuffix(name, ".wild.test.") {
			t.Fatalf("passed %q, which is not allowed", qq.Name)
		}
		// The resolver path's rule for a name (it refuses what
		// NormalizeName rejects): miekg/dns escapes every byte that is
		// not plain text ("\.", "\000"), so a label the kernel let
		// through with such a byte fails here too.
		if norm, err := allowlist.NormalizeName(qq.Name); err != nil || norm+"." != name {
			t.Fatalf("passed %q, which the resolver refuses (%v) or reads as %q", qq.Name, err, norm)
		}
		if len(m.Extra) == 1 {
			opt, ok := m.Extra[0].(*dns.OPT)
			if !ok || len(opt.Option) != 0 || opt.Hdr.Name != "." {
				t.Fatalf("passed an additional record that is not a bare OPT: %v", m.Extra[0])
			}
		}
		m.Compress = false
		if b, err := m.Pack(); err != nil || len(b) != len(data) {
			t.Fatalf("passed a query with trailing or compressed bytes (%d bytes, %d canonical)", len(data), len(b))
		}
	})
}

// TestKDNSJudges pins the verdicts the fuzz targets build on, so that they
// cannot pass by never reaching the parsers: a plain answer and a
// compressed CNAME chain are learned, a private address, a TTL above the
// maximum and a record of another owner go to user space; an allowed
// canonical query passes, others do not.
func TestKDNSJudges(t *testing.T) {
	o := load(t)
	q := "allowed.test."
	cases := []struct {
		what  string
		msg   []byte
		ret   uint32
		learn []string
	}{
		{"plain", answer(t, q, dns.TypeA, []string{q + " 300 IN A 203.0.113.5"}, nil, false), 1, []string{"203.0.113.5"}},
		{"chain", answer(t, q, dns.TypeA, []string{q + " 300 IN CNAME edge.cdn.example.net.", "edge.cdn.example.net. 60 IN A 198.51.100.7"}, nil, true), 1, []string{"198.51.100.7"}},
		{"aaaa", answer(t, q, dns.TypeA, []string{q + " 300 IN AAAA 2001:db8::5"}, nil, true), 1, []string{"2001:db8::5"}},
		{"nxdomain-soa", answer(t, q, dns.TypeA, nil, []string{"test. 300 IN SOA ns.test. host.test. 1 2 3 4 5"}, true), 1, nil},
		{"private", answer(t, q, dns.TypeA, []string{q + " 300 IN A 10.0.0.5"}, nil, true), 0, nil},
		{"mapped private", answer(t, q, dns.TypeA, []string{q + " 300 IN AAAA ::ffff:127.0.0.1"}, nil, true), 0, nil},
		{"long TTL", answer(t, q, dns.TypeA, []string{q + " 86400 IN A 203.0.113.5"}, nil, true), 0, nil},
		{"other owner", answer(t, q, dns.TypeA, []string{"evil.example.org. 60 IN A 203.0.113.66"}, nil, true), 0, nil},
	}
	for _, c := range cases {
		clearLearned(t, o)
		key := kdnstestKdnsQueryKey{Id: 0x1234}
		rec := kdnstestKdnsQuery{Session: testSession, Uport: htons(53), State: 1, Qtype: dns.TypeA}
		mapped := upstream.As16()
		mapped[10], mapped[11] = 0xff, 0xff
		copy(mapped[12:], upstream.AsSlice())
		for i := range 10 {
			mapped[i] = 0
		}
		for i := range rec.Upstream {
			rec.Upstream[i] = binary.NativeEndian.Uint32(mapped[i*4:])
		}
		w := wire("allowed.test")
		rec.NameLen = uint16(len(w))
		copy(rec.Name[:], w)
		if err := o.KdnsQueries.Put(&key, &rec); err != nil {
			t.Fatal(err)
		}
		ret, err := o.KdnsTestIngress.Run(&ebpf.RunOptions{Data: packet(upstream, client, 53, 40000, c.msg)})
		if err != nil {
			t.Fatal(err)
		}
		got := learned(t, o)
		if ret != c.ret || len(got) != len(c.learn) {
			t.Errorf("%s: verdict %d, learned %v; want %d, %v", c.what, ret, got, c.ret, c.learn)
			continue
		}
		for _, a := range c.learn {
			if _, ok := got[netip.MustParseAddr(a)]; !ok {
				t.Errorf("%s: %s not learned: %v", c.what, a, got)
			}
		}
	}

	query := func(name string, qtype uint16) []byte {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.Id = 0x4321
		b, _ := m.Pack()
		return b
	}
	for _, c := range []struct {
		name  string
		qtype uint16
		ret   uint32
	}{
		{"allowed.test.", dns.TypeA, 1}, {"ALLOWED.test.", dns.TypeAAAA, 1}, {"x.y.wild.test.", dns.TypeA, 1},
		{"wild.test.", dns.TypeA, 2}, {"x.allowed.test.", dns.TypeA, 2}, {"denied.test.", dns.TypeA, 2},
		{"allowed.test.", dns.TypeTXT, 2}, {"aallowed.test.", dns.TypeA, 2},
		// Labels under an allowed wildcard, held to the resolver's rule
		// (allowlist.NormalizeName): letters, digits, '-' and '_', no
		// '-' first or last; an A-label goes to user space, which
		// decodes it. miekg/dns reads "\." and "\DDD" as one byte.
		{"A_b-9.wild.test.", dns.TypeA, 1}, {"x--y.wild.test.", dns.TypeA, 1}, {"xn.wild.test.", dns.TypeA, 1},
		{"a\\.denied.test.wild.test.", dns.TypeA, 2}, {"a\\000b.wild.test.", dns.TypeA, 2},
		{"\\000.wild.test.", dns.TypeA, 2}, {"a\\032b.wild.test.", dns.TypeA, 2}, {"a\\\\b.wild.test.", dns.TypeA, 2},
		{"a*b.wild.test.", dns.TypeA, 2}, {"*.wild.test.", dns.TypeA, 2}, {"a\\255.wild.test.", dns.TypeA, 2},
		{"a@b.wild.test.", dns.TypeA, 2}, {"a/b.wild.test.", dns.TypeA, 2}, {"a:b.wild.test.", dns.TypeA, 2},
		{"-a.wild.test.", dns.TypeA, 2}, {"a-.wild.test.", dns.TypeA, 2}, {"-.wild.test.", dns.TypeA, 2},
		{"xn--bcher-kva.wild.test.", dns.TypeA, 2}, {"XN--a.wild.test.", dns.TypeA, 2}, {"b.xn--a.wild.test.", dns.TypeA, 2},
		{"Xn--Bcher-KVA.test.", dns.TypeA, 1}, // the entry's own A-label, validated with the entry
		{"xn--bcher-kva.test.", dns.TypeTXT, 2},
	} {
		ret, err := o.KdnsTestEgress.Run(&ebpf.RunOptions{Data: packet(client, upstream, 40000, 53, query(c.name, c.qtype))})
		if err != nil {
			t.Fatal(err)
		}
		if ret != c.ret {
			t.Errorf("query %s type %d: verdict %d, want %d", c.name, c.qtype, ret, c.ret)
		}
	}

	// Queries whose bytes the upstream could read otherwise than the
	// judge: everything but the one question and a bare OPT goes to user
	// space, which re-asks the name it judged.
	plain := query("allowed.test.", dns.TypeA)
	with := func(edit func(b []byte) []byte) []byte { return edit(append([]byte(nil), plain...)) }
	opt := []byte{0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0}
	for _, c := range []struct {
		what string
		msg  []byte
		ret  uint32
	}{
		{"plain", plain, 1},
		{"bare OPT", with(func(b []byte) []byte { b[11] = 1; return append(b, opt...) }), 1},
		{"a trailing byte", append(append([]byte(nil), plain...), 0), 2},
		{"a trailing query", append(append([]byte(nil), plain...), query("denied.test.", dns.TypeA)...), 2},
		{"two questions", with(func(b []byte) []byte {
			b[5] = 2
			return append(b, 6, 'd', 'e', 'n', 'i', 'e', 'd', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1)
		}), 2},
		{"no question", with(func(b []byte) []byte { b[5] = 0; return b }), 2},
		{"a compression pointer in the question", with(func(b []byte) []byte {
			return append(b[:12:12], 7, 'a', 'l', 'l', 'o', 'w', 'e', 'd', 0xc0, 12+8, 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1)
		}), 2},
		{"an answer record", with(func(b []byte) []byte { b[7] = 1; return append(b, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0) }), 2},
		{"an authority record", with(func(b []byte) []byte { b[9] = 1; return append(b, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0) }), 2},
		{"an additional record other than OPT", with(func(b []byte) []byte { b[11] = 1; return append(b, 0, 0, 16, 0, 1, 0, 0, 0, 0, 0, 0) }), 2},
		{"an OPT with options", with(func(b []byte) []byte {
			b[11] = 1
			o := append([]byte(nil), opt...)
			o[10] = 4
			return append(b, append(o, 0, 8, 0, 0)...)
		}), 2},
		{"two OPTs", with(func(b []byte) []byte { b[11] = 2; return append(append(b, opt...), opt...) }), 2},
		{"a response", with(func(b []byte) []byte { b[2] |= 0x80; return b }), 2},
		{"another opcode", with(func(b []byte) []byte { b[2] |= 0x10; return b }), 2},
		{"class CH", with(func(b []byte) []byte { b[len(b)-1] = 3; return b }), 2},
		{"cut short", plain[:len(plain)-1], 2},
	} {
		ret, err := o.KdnsTestEgress.Run(&ebpf.RunOptions{Data: packet(client, upstream, 40000, 53, c.msg)})
		if err != nil {
			t.Fatal(err)
		}
		if ret != c.ret {
			t.Errorf("query with %s: verdict %d, want %d", c.what, ret, c.ret)
		}
	}

	// Traffic of the socket with other peers is not this path's DNS:
	// it passes both ways unjudged (the sock_addr hooks judged its peer).
	other := netip.MustParseAddr("203.0.113.80")
	if ret, err := o.KdnsTestEgress.Run(&ebpf.RunOptions{Data: packet(client, other, 40000, 443, []byte("not dns"))}); err != nil || ret != 1 {
		t.Errorf("egress to another peer: verdict %d (%v), want 1", ret, err)
	}
	if ret, err := o.KdnsTestEgress.Run(&ebpf.RunOptions{Data: packet(client, upstream, 40000, 5353, query("denied.test.", dns.TypeA))}); err != nil || ret != 1 {
		t.Errorf("egress to the upstream's address on another port: verdict %d (%v), want 1", ret, err)
	}
	if ret, err := o.KdnsTestIngress.Run(&ebpf.RunOptions{Data: packet(other, client, 443, 40000, []byte("not dns"))}); err != nil || ret != 1 {
		t.Errorf("ingress from another peer: verdict %d (%v), want 1", ret, err)
	}
	if ret, err := o.KdnsTestIngress.Run(&ebpf.RunOptions{Data: packet(upstream, client, 53, 40000, []byte("short"))}); err != nil || ret != 0 {
		t.Errorf("ingress of garbage from the upstream: verdict %d (%v), want 0", ret, err)
	}
}

// skbContext is a struct __sk_buff for BPF_PROG_TEST_RUN with only the
// GSO fields set (the kernel takes no others but a few it ignores here):
// 192 bytes, gso_segs at 164, gso_size at 176.
func skbContext(segs, size uint32) []byte { return skbContextMark(segs, size, 0) }

// skbContextMark is skbContext with the skb's mark (offset 8).
func skbContextMark(segs, size, mark uint32) []byte {
	c := make([]byte, 192)
	binary.NativeEndian.PutUint32(c[8:], mark)
	binary.NativeEndian.PutUint32(c[164:], segs)
	binary.NativeEndian.PutUint32(c[176:], size)
	return c
}

// TestKDNSSegmented: an skb that the wire carries as several datagrams (a
// UDP GSO send, coalesced GRO answers) is never judged as one message:
// egress drops an allowed query that comes segmented, ingress drops a
// segmented answer and learns nothing, whether the record says the kernel
// or user space answers it. The same bytes unsegmented pass, so the
// verdicts come from the segmentation alone.
// injectMark is loader.KDNSInjectMark (bpf/kdns.h's KDNS_INJECT_MARK).
const injectMark = 0x51ce0053

func TestKDNSSegmented(t *testing.T) {
	o := load(t)
	m := new(dns.Msg)
	m.SetQuestion("allowed.test.", dns.TypeA)
	m.Id = 0x4444
	query, _ := m.Pack()
	key := kdnstestKdnsQueryKey{Id: 0x4444}
	for _, c := range []struct {
		what      string
		segs, gso uint32
		want      uint32
	}{{"one datagram", 0, 0, 1}, {"gso_size only", 0, 20, 2}, {"two segments", 2, 20, 2}} {
		_ = o.KdnsQueries.Delete(&key)
		ret, err := o.KdnsTestEgress.Run(&ebpf.RunOptions{Data: packet(client, upstream, 40000, 53, query), Context: skbContext(c.segs, c.gso)})
		if err != nil {
			t.Fatal(err)
		}
		if ret != c.want {
			t.Errorf("egress, %s: verdict %d, want %d", c.what, ret, c.want)
		}
		var rec kdnstestKdnsQuery
		if err := o.KdnsQueries.Lookup(&key, &rec); c.want != 1 && err == nil && rec.State == 1 {
			t.Errorf("egress, %s: a kernel record for a segmented query", c.what)
		}
	}

	msg := answer(t, "allowed.test.", dns.TypeA, []string{"allowed.test. 300 IN A 203.0.113.5"}, nil, false)
	for _, c := range []struct {
		what      string
		state     uint8
		segs, gso uint32
		mark      uint32
		want      uint32
		learn     int
	}{
		{"one datagram", 1, 0, 0, 0, 1, 1},
		{"coalesced", 1, 2, 40, 0, 0, 0},
		{"coalesced, user space record", 2, 2, 40, injectMark, 0, 0},
		// While user space answers, only its own (marked) answer passes.
		{"one datagram, user space record, injected", 2, 0, 0, injectMark, 1, 0},
		{"one datagram, user space record, not injected", 2, 0, 0, 0, 0, 0},
	} {
		clearLearned(t, o)
		rec := kdnstestKdnsQuery{Session: testSession, Uport: htons(53), State: c.state, Qtype: dns.TypeA}
		mapped := netip.AddrFrom16(upstream.As16()).As16()
		mapped[10], mapped[11] = 0xff, 0xff
		copy(mapped[12:], upstream.AsSlice())
		for i := range 10 {
			mapped[i] = 0
		}
		for i := range rec.Upstream {
			rec.Upstream[i] = binary.NativeEndian.Uint32(mapped[i*4:])
		}
		w := wire("allowed.test")
		rec.NameLen = uint16(len(w))
		copy(rec.Name[:], w)
		k := kdnstestKdnsQueryKey{Id: 0x1234}
		if err := o.KdnsQueries.Put(&k, &rec); err != nil {
			t.Fatal(err)
		}
		ret, err := o.KdnsTestIngress.Run(&ebpf.RunOptions{Data: packet(upstream, client, 53, 40000, msg), Context: skbContextMark(c.segs, c.gso, c.mark)})
		if err != nil {
			t.Fatal(err)
		}
		if got := learned(t, o); ret != c.want || len(got) != c.learn {
			t.Errorf("ingress, %s: verdict %d, learned %v; want %d and %d addresses", c.what, ret, got, c.want, c.learn)
		}
	}
}
