// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/allowlist"
)

// testPolicyJSON is the policy most tests use: one host, one wildcard, and a
// wildcard whose entry allows private addresses.
const testPolicyJSON = `{"allowed_hosts": [
	"api.example.com",
	"*.example.net",
	{"host": "*.private.example.net", "allow_private": true},
	{"host": "x.example", "allow_private": true}
]}`

func testPolicy(t testing.TB) *allowlist.Policy {
	t.Helper()
	p, err := allowlist.Parse([]byte(testPolicyJSON))
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

// fakeClock is a datapath clock the test moves by hand.
type fakeClock struct{ t atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.t.Store(int64(1000 * time.Second))
	return c
}

func (c *fakeClock) Now() time.Duration      { return time.Duration(c.t.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.t.Add(int64(d)) }

// seq orders events across goroutines (learner calls, replies received).
var seq atomic.Int64

type learnCall struct {
	Addr    netip.Addr
	Expires time.Duration
	Seq     int64
}

// fakeLearner records what the resolver teaches the datapath.
type fakeLearner struct {
	mu      sync.Mutex
	learns  []learnCall
	forgets []netip.Addr
	err     error // returned by Learn when set

	entered chan netip.Addr // when set, Learn reports its address here...
	release chan struct{}   // ...and, when set, waits for this to close
}

func (l *fakeLearner) Learn(a netip.Addr, expires time.Duration) error {
	if l.entered != nil {
		l.entered <- a
	}
	if l.release != nil {
		<-l.release
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.learns = append(l.learns, learnCall{Addr: a, Expires: expires, Seq: seq.Add(1)})
	return nil
}

func (l *fakeLearner) Forget(a netip.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgets = append(l.forgets, a)
	return nil
}

func (l *fakeLearner) calls() []learnCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.learns)
}

func (l *fakeLearner) forgotten() []netip.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.forgets)
}

// addrs is the set of addresses learned, each with its latest expiry.
func (l *fakeLearner) addrs() map[netip.Addr]time.Duration {
	m := map[netip.Addr]time.Duration{}
	for _, c := range l.calls() {
		m[c.Addr] = c.Expires
	}
	return m
}

// eventLog collects the resolver's events.
type eventLog struct {
	mu  sync.Mutex
	evs []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, e)
}

func (l *eventLog) of(k EventKind) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Event
	for _, e := range l.evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

func (l *eventLog) all() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.evs)
}

// stubQuery is one query an upstream stub received.
type stubQuery struct {
	Name string // lower case, fully qualified
	Type uint16
	ID   uint16
	From netip.AddrPort
	TCP  bool
	EDNS *dns.OPT // the query's OPT record, if any
}

// stub is an upstream DNS server on 127.0.0.1 (UDP and TCP on one port)
// serving a fake zone and logging every query.
type stub struct {
	addr string
	// zone maps "name. TYPE" (lower case) to the whole answer section.
	zone map[string][]dns.RR
	// hook, when set, may answer (or not answer) a query itself; it
	// returns false to fall back to the zone.
	hook func(w dns.ResponseWriter, req *dns.Msg, tcp bool) bool

	mu  sync.Mutex
	log []stubQuery
}

// zone is the text of a fake zone: "name. TYPE" to answer records.
type zone map[string][]string

func startStub(t testing.TB, z zone, hook func(w dns.ResponseWriter, req *dns.Msg, tcp bool) bool) *stub {
	t.Helper()
	s := &stub{zone: map[string][]dns.RR{}, hook: hook}
	for k, rrs := range z {
		for _, txt := range rrs {
			rr, err := dns.NewRR(txt)
			if err != nil {
				t.Fatalf("zone record %q: %v", txt, err)
			}
			name, typ, _ := strings.Cut(k, " ")
			key := strings.ToLower(name) + " " + strings.ToUpper(typ)
			s.zone[key] = append(s.zone[key], rr)
		}
	}
	pc, l := listenBoth(t, "127.0.0.1")
	s.addr = pc.LocalAddr().String()
	udp := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) { s.serve(w, m, false) })}
	tcp := &dns.Server{Listener: l, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) { s.serve(w, m, true) })}
	for _, srv := range []*dns.Server{udp, tcp} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("stub did not start")
		}
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return s
}

// listenBoth binds UDP and TCP on one kernel-chosen port of ip.
func listenBoth(t testing.TB, ip string) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 50 {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l
		}
		pc.Close()
	}
	t.Fatal("no port free for both UDP and TCP")
	return nil, nil
}

func (s *stub) serve(w dns.ResponseWriter, req *dns.Msg, tcp bool) {
	from, _ := netip.ParseAddrPort(w.RemoteAddr().String())
	q := stubQuery{ID: req.Id, From: from, TCP: tcp, EDNS: req.IsEdns0()}
	if len(req.Question) > 0 {
		q.Name = strings.ToLower(req.Question[0].Name)
		q.Type = req.Question[0].Qtype
	}
	s.mu.Lock()
	s.log = append(s.log, q)
	s.mu.Unlock()
	if s.hook != nil && s.hook(w, req, tcp) {
		return
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(1232, opt.Do())
	}
	if len(req.Question) == 1 {
		if rrs, ok := s.zone[q.Name+" "+dns.TypeToString[q.Type]]; ok {
			for _, rr := range rrs {
				m.Answer = append(m.Answer, dns.Copy(rr))
			}
		} else if _, ok := s.zone[q.Name+" NOERROR"]; ok {
			// name exists, no data of this type
		} else {
			m.Rcode = dns.RcodeNameError
			soa, _ := dns.NewRR("example.net. 60 IN SOA ns.example.net. hostmaster.example.net. 1 3600 600 86400 60")
			m.Ns = append(m.Ns, soa)
		}
	}
	_ = w.WriteMsg(m)
}

func (s *stub) queries() []stubQuery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// count is how many queries for name (any case, with or without the dot)
// the stub received.
func (s *stub) count(name string) int {
	name = strings.ToLower(dns.Fqdn(name))
	n := 0
	for _, q := range s.queries() {
		if q.Name == name {
			n++
		}
	}
	return n
}

// env is a resolver listening on loopback with a stub upstream, a fake
// learner, a fake clock and an event log.
type env struct {
	r       *Resolver
	stub    *stub
	learner *fakeLearner
	clock   *fakeClock
	events  *eventLog
	port4   uint16
	port6   uint16
}

func newEnv(t testing.TB, z zone, hook func(dns.ResponseWriter, *dns.Msg, bool) bool, opts ...func(*Config)) *env {
	t.Helper()
	e := &env{learner: &fakeLearner{}, clock: newFakeClock(), events: &eventLog{}}
	e.stub = startStub(t, z, hook)
	cfg := Config{
		Policy:    testPolicy(t),
		Upstreams: []string{e.stub.addr},
		Learner:   e.learner,
		Clock:     e.clock.Now,
		MinTTL:    5 * time.Second,
		MaxTTL:    time.Hour,
		Grace:     10 * time.Second,
		Timeout:   time.Second,
		OnEvent:   e.events.add,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if l, ok := cfg.Learner.(*fakeLearner); ok {
		e.learner = l
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := r.ListenLoopback(); err != nil {
		t.Fatalf("ListenLoopback: %v", err)
	}
	t.Cleanup(r.Close)
	e.r = r
	e.port4, e.port6 = r.Ports()
	if e.port4 == 0 || e.port6 == 0 {
		t.Fatalf("Ports() = %d, %d", e.port4, e.port6)
	}
	return e
}

func (e *env) addr4() string { return fmt.Sprintf("127.0.0.1:%d", e.port4) }
func (e *env) addr6() string { return fmt.Sprintf("[::1]:%d", e.port6) }

// ask queries the resolver over UDP on 127.0.0.1 with EDNS0 (so that
// answers are not truncated to 512 bytes).
func (e *env) ask(t testing.TB, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := query(name, qtype)
	m.SetEdns0(4096, false)
	return exchange(t, "udp", e.addr4(), m)
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = true
	return m
}

func exchange(t testing.TB, network, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s query %s to %s: %v", network, m.Question[0].Name, addr, err)
	}
	if r.Id != m.Id {
		t.Fatalf("reply ID %d, query ID %d", r.Id, m.Id)
	}
	return r
}

// answerAddrs lists the A and AAAA addresses of an answer section.
func answerAddrs(m *dns.Msg) []netip.Addr {
	var out []netip.Addr
	for _, rr := range m.Answer {
		switch r := rr.(type) {
		case *dns.A:
			a, _ := netip.AddrFromSlice(r.A.To4())
			out = append(out, a)
		case *dns.AAAA:
			a, _ := netip.AddrFromSlice(r.AAAA.To16())
			out = append(out, a)
		}
	}
	return out
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func rcode(m *dns.Msg) string { return dns.RcodeToString[m.Rcode] }

// waitFor polls cond until it holds or the bounded wait ends.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// resolveDirect calls Resolve without sockets, bounded by a context.
func resolveDirect(r *Resolver, m *dns.Msg) *dns.Msg {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.Resolve(ctx, m, netip.MustParseAddrPort("127.0.0.1:40000"))
}
