// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
)

const (
	// socketsPerUpstream sockets are used round-robin per upstream server.
	socketsPerUpstream = 4
	// maxUsesPerSocket queries after which a socket is replaced, so the
	// source port keeps changing without a socket per query.
	maxUsesPerSocket = 512
)

// upstream is one upstream server reached over a small pool of connected
// UDP sockets whose replies are matched to queries by ID and question.
type upstream struct {
	addr    string
	timeout time.Duration

	mu    sync.Mutex
	socks [socketsPerUpstream]*upSock
	next  int
	// draining are retired sockets with queries still pending: the
	// timeout sweep must still see them.
	draining []*upSock
	// closed is set by close: a query still on its way (a batch being
	// handled while the resolver closes) must not open a new socket
	// that nothing would close.
	closed bool
}

// waiter is a query waiting for its answer: a synchronous exchange waits
// on ch; a fast-path query (async) is finished by the socket's reader, or
// by the timeout sweep after its deadline.
type waiter struct {
	q        dns.Question
	ch       chan *dns.Msg
	async    *pendingQuery
	wire     []byte // async: the query to send, whose ID register sets
	deadline time.Time
}

type upSock struct {
	conn    *net.UDPConn
	batch   batchConn
	mu      sync.Mutex
	pending map[uint16]waiter
	uses    int
	retired bool
}

func newUpstream(addr string, timeout time.Duration) *upstream {
	return &upstream{addr: addr, timeout: timeout}
}

// sock returns a socket with room for another query, replacing a worn one,
// with w registered on it under a fresh random ID. Registering before the
// socket is handed out keeps a worn socket from being closed between a
// query picking it and the query's registration. The next call gets the
// next socket only if advance is set: the queries of one batch share a
// socket, so that they leave in one sendmmsg and their answers come back
// to one reader.
func (u *upstream) sock(w waiter, advance bool) (*upSock, uint16, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, 0, fmt.Errorf("upstream %s: %w", u.addr, net.ErrClosed)
	}
	i := u.next
	if advance {
		u.next = (u.next + 1) % len(u.socks)
	}
	s := u.socks[i]
	if s != nil {
		s.mu.Lock()
		worn := s.uses >= maxUsesPerSocket
		if worn {
			s.retired = true
			if len(s.pending) == 0 {
				s.conn.Close()
			} else {
				u.draining = append(u.draining, s)
			}
			s.mu.Unlock()
		} else {
			s.uses++
			id := s.register(w)
			s.mu.Unlock()
			return s, id, nil
		}
	}
	raddr, err := net.ResolveUDPAddr("udp", u.addr)
	if err != nil {
		return nil, 0, fmt.Errorf("upstream %s: %w", u.addr, err)
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return nil, 0, fmt.Errorf("upstream %s: %w", u.addr, err)
	}
	growReadBuffer(conn)
	s = &upSock{conn: conn, batch: newBatchConn(conn), pending: map[uint16]waiter{}, uses: 1}
	id := s.register(w) // before read starts: no lock needed yet
	u.socks[i] = s
	go s.read()
	return s, id, nil
}

// register adds w under a random ID not in use on s; s.mu is held (or s
// not shared yet). A socket has at most maxUsesPerSocket queries, so a
// free ID is found quickly.
//
// A fast-path query's wire gets its ID here, before the query is
// published: from then on the reader or the timeout sweep may own it.
func (s *upSock) register(w waiter) uint16 {
	for {
		id := uint16(rand.Uint32())
		if _, busy := s.pending[id]; !busy {
			if w.wire != nil {
				binary.BigEndian.PutUint16(w.wire, id)
			}
			s.pending[id] = w
			return id
		}
	}
}

// release forgets the query with id, closing a retired socket after its
// last query.
func (s *upSock) release(id uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, id)
	if s.retired && len(s.pending) == 0 {
		s.conn.Close()
	}
}

// read delivers replies to their waiters, in batches. A reply whose ID is
// not pending, or whose question differs from the query's, is dropped: it
// is late, or spoofed. Fast-path queries are finished here and their
// replies written in batches too.
func (s *upSock) read() {
	bufs := answerBufs.Get().(*[]ipv4.Message)
	defer answerBufs.Put(bufs)
	in := *bufs
	out := map[*udpListener]*outBatch{}
	for {
		n, err := s.batch.ReadBatch(in, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		for i := range in[:n] {
			b := in[i].Buffers[0][:in[i].N]
			s.deliver(b, in[i].N == maxUDPAnswer || in[i].Flags&msgTrunc != 0, out)
		}
		for l, o := range out {
			o.flush(l.batch)
		}
	}
}

// deliver hands the datagram b to the query it answers, if any. cut says
// b was longer than the buffer.
func (s *upSock) deliver(b []byte, cut bool, out map[*udpListener]*outBatch) {
	if len(b) < headerLen || b[2]&0x80 == 0 {
		return
	}
	id := binary.BigEndian.Uint16(b)
	s.mu.Lock()
	w, ok := s.pending[id]
	s.mu.Unlock()
	if !ok || !questionIs(b, w.q) {
		return
	}
	// Parsed before the query is taken: a malformed datagram with the
	// right ID and question (spoofed, or a broken server) must not use up
	// the query the real answer is for.
	var (
		m      *dns.Msg
		ans    *packedAnswer
		learn  []Learned
		minTTL uint32
		wire   bool
	)
	pq := w.async
	switch {
	case cut:
		m = new(dns.Msg)
		if !unpackTruncated(m, b) {
			return
		}
	case pq != nil:
		r := pq.l.r
		ans, learn, minTTL, wire = acceptWire(b, &pq.q, uint32(r.cfg.MaxTTL/time.Second), pq.entry.AllowPrivate)
	}
	if m == nil && !wire {
		m = new(dns.Msg)
		if m.Unpack(b) != nil {
			return
		}
	}
	s.mu.Lock()
	cur, ok := s.pending[id]
	ok = ok && cur.ch == w.ch && cur.async == w.async
	if ok {
		delete(s.pending, id)
	}
	if s.retired && len(s.pending) == 0 {
		s.conn.Close()
	}
	s.mu.Unlock()
	switch {
	case !ok:
	case pq == nil:
		w.ch <- m
	case m != nil && m.Truncated:
		go pq.retryTCP(m)
	case wire:
		pq.l.r.answeredWire(pq, ans, learn, minTTL, out)
	default:
		pq.l.r.answered(pq, m, out)
	}
}

// questionIs reports whether the answer b carries exactly the question q
// (whose name may lack the final dot).
func questionIs(b []byte, q dns.Question) bool {
	if binary.BigEndian.Uint16(b[4:]) != 1 {
		return false
	}
	end, ok := nameIs(b, headerLen, strings.TrimSuffix(strings.ToLower(q.Name), "."))
	return ok && end+4 <= len(b) && binary.BigEndian.Uint16(b[end:]) == q.Qtype && binary.BigEndian.Uint16(b[end+2:]) == q.Qclass
}

// expired removes and returns the fast-path queries past their deadline.
func (u *upstream) expired(now time.Time) []*pendingQuery {
	u.mu.Lock()
	defer u.mu.Unlock()
	var late []*pendingQuery
	draining := u.draining[:0]
	for _, s := range append(u.socks[:], u.draining...) {
		if s == nil {
			continue
		}
		s.mu.Lock()
		for id, w := range s.pending {
			if w.async != nil && now.After(w.deadline) {
				delete(s.pending, id)
				late = append(late, w.async)
			}
		}
		if s.retired {
			if len(s.pending) == 0 {
				s.conn.Close()
			} else {
				draining = append(draining, s)
			}
		}
		s.mu.Unlock()
	}
	clear(u.draining[len(draining):])
	u.draining = draining
	return late
}

// unpackTruncated reads the header and question of an answer cut short,
// and marks it truncated.
func unpackTruncated(m *dns.Msg, b []byte) bool {
	if len(b) < headerLen || binary.BigEndian.Uint16(b[4:]) != 1 {
		return false
	}
	name, off, err := dns.UnpackDomainName(b, headerLen)
	if err != nil || off+4 > len(b) {
		return false
	}
	m.Id = binary.BigEndian.Uint16(b)
	m.Response = b[2]&0x80 != 0
	m.Truncated = true
	m.Question = []dns.Question{{Name: name, Qtype: binary.BigEndian.Uint16(b[off:]), Qclass: binary.BigEndian.Uint16(b[off+2:])}}
	return true
}

func sameQuestion(a, b dns.Question) bool {
	return a.Qtype == b.Qtype && a.Qclass == b.Qclass && strings.EqualFold(a.Name, b.Name)
}

// exchange sends q over UDP with a fresh random ID and waits for the
// matching reply; a truncated reply is retried over TCP.
func (u *upstream) exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	ch := make(chan *dns.Msg, 1)
	s, id, err := u.sock(waiter{q: q.Question[0], ch: ch}, true)
	if err != nil {
		return nil, err
	}

	// q is this query's own message, used by one upstream at a time: no
	// copy needed to give it this socket's ID.
	q.Id = id
	wire, err := q.Pack()
	if err != nil {
		s.release(id)
		return nil, fmt.Errorf("pack query: %w", err)
	}
	if _, err := s.conn.Write(wire); err != nil {
		s.release(id)
		return nil, fmt.Errorf("send to %s: %w", u.addr, err)
	}
	timer := time.NewTimer(u.timeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		if r.Truncated {
			return u.exchangeTCP(ctx, q)
		}
		return r, nil
	case <-timer.C:
		s.release(id)
		return nil, fmt.Errorf("upstream %s: no answer within %v", u.addr, u.timeout)
	case <-ctx.Done():
		s.release(id)
		return nil, ctx.Err()
	}
}

func (u *upstream) exchangeTCP(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	m := q.Copy()
	m.Id = dns.Id()
	c := &dns.Client{Net: "tcp", Timeout: u.timeout}
	r, _, err := c.ExchangeContext(ctx, m, u.addr)
	if err != nil {
		return nil, fmt.Errorf("upstream %s over TCP: %w", u.addr, err)
	}
	if r.Id != m.Id || len(r.Question) != 1 || !sameQuestion(r.Question[0], q.Question[0]) {
		return nil, fmt.Errorf("upstream %s over TCP: reply does not match the query", u.addr)
	}
	return r, nil
}

func (u *upstream) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	for _, s := range u.draining {
		s.conn.Close()
	}
	u.draining = nil
	for i, s := range u.socks {
		if s != nil {
			s.conn.Close()
			u.socks[i] = nil
		}
	}
}
