// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// A query that picked a socket keeps it usable even when, before it sent
// anything, enough other queries went by for the socket to be worn out and
// retired; the retired socket is closed after that query's reply.
func TestRetiredSocketNotClosedUnderQuery(t *testing.T) {
	st := startStub(t, apiZone, nil)
	u := newUpstream(st.addr, 2*time.Second)
	defer u.close()

	q := query("api.example.com.", dns.TypeA)
	ch := make(chan *dns.Msg, 1)
	s0, id0, err := u.sock(waiter{q: q.Question[0], ch: ch}, true)
	if err != nil {
		t.Fatal(err)
	}
	// Every other query comes and goes before ours is sent.
	for range socketsPerUpstream * maxUsesPerSocket {
		s, id, err := u.sock(waiter{q: q.Question[0], ch: make(chan *dns.Msg, 1)}, true)
		if err != nil {
			t.Fatal(err)
		}
		s.release(id)
	}
	s0.mu.Lock()
	retired := s0.retired
	s0.mu.Unlock()
	if !retired {
		t.Fatalf("the socket was not retired after %d uses", socketsPerUpstream*maxUsesPerSocket)
	}
	m := q.Copy()
	m.Id = id0
	wire, _ := m.Pack()
	if _, err := s0.conn.Write(wire); err != nil {
		t.Fatalf("the socket a query picked was closed under it: %v", err)
	}
	select {
	case r := <-ch:
		if r.Id != id0 || len(r.Answer) != 1 {
			t.Errorf("reply %v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reply on the retired socket")
	}
	waitFor(t, "the retired socket to close after its last query", func() bool {
		_, err := s0.conn.Write(wire)
		return errors.Is(err, net.ErrClosed)
	})
}

// Sockets are reused, and replaced after maxUsesPerSocket queries so that
// the source port still changes.
func TestUpstreamSocketsReplaced(t *testing.T) {
	st := startStub(t, nil, nil)
	u := newUpstream(st.addr, 2*time.Second)
	defer u.close()
	const n = socketsPerUpstream*maxUsesPerSocket + 2*socketsPerUpstream
	ctx := context.Background()
	for i := range n {
		m := query(fmt.Sprintf("n%d.example.net.", i), dns.TypeA)
		r, err := u.exchange(ctx, m)
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		if r.Rcode != dns.RcodeNameError {
			t.Fatalf("query %d: rcode %s", i, rcode(r))
		}
	}
	ports := map[uint16]int{}
	for _, q := range st.queries() {
		ports[q.From.Port()]++
	}
	if len(ports) <= socketsPerUpstream || len(ports) > 2*socketsPerUpstream {
		t.Errorf("%d source ports for %d queries, want between %d and %d", len(ports), n, socketsPerUpstream+1, 2*socketsPerUpstream)
	}
	for p, c := range ports {
		if c > maxUsesPerSocket {
			t.Errorf("port %d used for %d queries, more than %d", p, c, maxUsesPerSocket)
		}
	}
}

// A timed-out query is unregistered: a late reply is dropped, and the ID
// table does not grow.
func TestUpstreamTimeoutUnregisters(t *testing.T) {
	late := make(chan struct{})
	hook := func(w dns.ResponseWriter, req *dns.Msg, tcp bool) bool {
		<-late
		return false
	}
	st := startStub(t, apiZone, hook)
	u := newUpstream(st.addr, 50*time.Millisecond)
	defer u.close()
	_, err := u.exchange(context.Background(), query("api.example.com.", dns.TypeA))
	if err == nil {
		t.Fatal("no timeout")
	}
	close(late)
	u.mu.Lock()
	socks := u.socks
	u.mu.Unlock()
	for _, s := range socks {
		if s == nil {
			continue
		}
		s.mu.Lock()
		n := len(s.pending)
		s.mu.Unlock()
		if n != 0 {
			t.Errorf("%d queries still pending after the timeout", n)
		}
	}
	// The context bounds a query too.
	dead := startStub(t, nil, func(dns.ResponseWriter, *dns.Msg, bool) bool { return true })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	u2 := newUpstream(dead.addr, 5*time.Second)
	defer u2.close()
	start := time.Now()
	if _, err := u2.exchange(ctx, query("api.example.com.", dns.TypeA)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("context deadline: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("context deadline honoured after %v", d)
	}
}

// A query that reaches an upstream after Close (a batch still being
// handled) fails instead of opening a socket nothing would close.
func TestUpstreamClosedOpensNothing(t *testing.T) {
	u := newUpstream("127.0.0.1:9", time.Second)
	u.close()
	q := new(dns.Msg)
	q.SetQuestion("a.example.com.", dns.TypeA)
	if _, _, err := u.sock(waiter{q: q.Question[0], ch: make(chan *dns.Msg, 1)}, true); err == nil {
		t.Fatal("sock after close succeeded")
	}
	for _, s := range u.socks {
		if s != nil {
			t.Fatal("a socket was opened after close")
		}
	}
}

// Closing a resolver while queries stream in (and are forwarded) leaves no
// socket open.
func TestCloseUnderLoadLeavesNoSocket(t *testing.T) {
	stub := startStub(t, zone{"api.example.com. A": {"api.example.com. 300 IN A 203.0.113.7"}}, nil)
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd: %v", err)
		}
		return len(ents)
	}
	before := fds()
	r, err := New(Config{Policy: testPolicy(t), Upstreams: []string{stub.addr}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ListenLoopback(); err != nil {
		t.Fatal(err)
	}
	p4, _ := r.Ports()
	c, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", p4))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			m := new(dns.Msg)
			m.SetQuestion(fmt.Sprintf("n%d.example.net.", i), dns.TypeA)
			b, _ := m.Pack()
			_, _ = c.Write(b)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	if len(stub.queries()) == 0 {
		t.Fatal("nothing was forwarded: the test would prove nothing")
	}
	r.Close()
	close(stop)
	<-done
	c.Close()
	deadline := time.Now().Add(3 * time.Second)
	for fds() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := fds(); n > before {
		t.Errorf("%d descriptors open after Close, %d before the resolver", n, before)
	}
}
