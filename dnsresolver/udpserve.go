// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/sluice-dev/sluice/allowlist"
)

// The resolver's UDP side is its own loop rather than miekg/dns's server:
// a profile of the benchmark spent most of the resolver's CPU in system
// calls (four per forwarded query: read the query, write it upstream, read
// the answer, write the reply) and in waking one goroutine per query. Here
// one goroutine per listening socket reads queries in batches (recvmmsg),
// answers cache hits from packed bytes, and sends forwarded queries
// upstream in batches (sendmmsg) without waiting; the goroutine reading an
// upstream socket finishes each answer (filter, learn, cache) and writes the
// replies in batches. Queries of an unusual shape, and TCP, take the general
// path through Resolve.

const (
	// udpBatch datagrams are read or written per system call at most.
	udpBatch = 16
	// maxUDPQuery is the largest query read; a longer one is cut and
	// answered FORMERR by the general path. Real queries are a few
	// hundred bytes, and every session's listeners hold their buffers.
	maxUDPQuery = 1024
	// maxUDPAnswer is the largest upstream answer read over UDP: sluice
	// asks for at most upstreamUDPSize, and a longer answer is retried over
	// TCP as if it were truncated.
	maxUDPAnswer = 2048
)

// answerBufs are upstream readers' batch buffers: a socket is replaced
// every maxUsesPerSocket queries, and its successor takes its buffers.
var answerBufs = sync.Pool{New: func() any {
	ms := make([]ipv4.Message, udpBatch)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, maxUDPAnswer)}
	}
	return &ms
}}

// batchConn is a UDP socket read and written in batches (ipv4 or ipv6
// PacketConn: their Message types are the same).
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

func newBatchConn(c *net.UDPConn) batchConn {
	if a, ok := c.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() == nil {
		return ipv6.NewPacketConn(c)
	}
	return ipv4.NewPacketConn(c)
}

// udpListener is one loopback UDP socket clients ask.
type udpListener struct {
	r            *Resolver
	conn         *net.UDPConn
	batch        batchConn
	generalSlots chan struct{}  // maxGeneral
	probe        *net.UDPConn   // the liveness probe's socket (liveness.go); set before serving
	probeFrom    netip.AddrPort // its address
	probeTo      netip.AddrPort // the listener's address, where probes go
}

// pendingQuery is a query of the fast path waiting for an upstream.
type pendingQuery struct {
	l      *udpListener
	client *net.UDPAddr
	q      wireQuery // q.question points into buf
	buf    []byte    // the client's question, and then the upstream query
	entry  allowlist.Entry
	key    cacheKey
	up     int       // index of the upstream asked
	sends  int       // how many times it was sent (to any upstream)
	sent   time.Time // when, for ObserveUpstream
	errs   []error   // of the upstreams that failed
}

// outBatch collects datagrams to write to one socket. Its messages and
// their buffers are reused from one batch to the next.
type outBatch struct {
	msgs []ipv4.Message
	n    int
}

// buf returns a buffer to append the next datagram to.
func (o *outBatch) buf() []byte {
	if o.n < len(o.msgs) {
		return o.msgs[o.n].Buffers[0][:0]
	}
	return make([]byte, 0, dns.MinMsgSize)
}

// push queues b (from buf) for addr (nil on a connected socket).
func (o *outBatch) push(b []byte, addr net.Addr) {
	if o.n == len(o.msgs) {
		o.msgs = append(o.msgs, ipv4.Message{Buffers: make([][]byte, 1)})
	}
	o.msgs[o.n].Buffers[0] = b
	o.msgs[o.n].Addr = addr
	o.n++
}

// flush writes the queued datagrams. A datagram the kernel refuses (the
// client's socket is gone) is skipped: UDP replies are best effort.
func (o *outBatch) flush(c batchConn) {
	ms := o.msgs[:o.n]
	for len(ms) > 0 {
		n, err := c.WriteBatch(ms, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				break
			}
			n = max(n, 1)
		}
		ms = ms[n:]
	}
	for i := range o.msgs[:o.n] {
		o.msgs[i].Addr = nil // do not keep clients' addresses alive
	}
	o.n = 0
}

// serveUDP reads and answers queries until the socket is closed.
func (l *udpListener) serveUDP() {
	r := l.r
	in := make([]ipv4.Message, udpBatch)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, maxUDPQuery)}
	}
	var replies outBatch
	var fwd []*pendingQuery
	for {
		n, err := l.batch.ReadBatch(in, 0)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		now := r.cfg.Clock()
		for i := range in[:n] {
			m := &in[i]
			client, _ := m.Addr.(*net.UDPAddr)
			if client == nil {
				continue
			}
			b := m.Buffers[0][:m.N]
			if l.isProbe(client) {
				if len(b) >= 12 {
					out := append(replies.buf(), b[:12]...)
					out[2] |= 0x80
					replies.push(out, client)
				}
				continue
			}
			q, ok := parseQuery(b)
			if !ok || m.N >= maxUDPQuery {
				l.general(b, client)
				continue
			}
			answered, pq := l.fast(&q, client, now, &replies)
			switch {
			case pq != nil:
				fwd = append(fwd, pq)
			case !answered:
				l.general(b, client)
			}
		}
		replies.flush(l.batch)
		if len(fwd) > 0 {
			r.sendUpstream(fwd)
			clear(fwd)
			fwd = fwd[:0]
		}
	}
}

// fast answers q from the cache (the reply queued on replies), or returns
// the query to forward. Neither: the general path must answer.
func (l *udpListener) fast(q *wireQuery, client *net.UDPAddr, now time.Duration, replies *outBatch) (answered bool, fwd *pendingQuery) {
	r := l.r
	if q.qclass != dns.ClassINET || q.qtype == dns.TypePTR || q.name == "localhost" || hasSuffix(q.name, ".localhost") {
		return false, nil
	}
	if _, err := allowlist.NormalizeName(q.name); err != nil {
		return false, nil
	}
	entry, ok := r.policy.Load().MatchName(q.name)
	if !ok && r.extraAllowed(q.name) {
		ok = true
	}
	if !ok {
		if r.cfg.Audit || r.cfg.Ask != nil {
			// Audit: forwarded and reported by the general path. Ask:
			// the general path holds the answer while a person decides.
			return false, nil
		}
		// Refused here, not in a goroutine of the general path: a flood
		// of names that are not allowed is what an exfiltration attempt
		// looks like.
		r.event(Event{Kind: EventRefused, Name: q.name, QType: typeString(q.qtype), Client: client.AddrPort(), Reason: ReasonNotAllowed})
		replies.push(appendEmptyReply(replies.buf(), q, dns.RcodeRefused), client)
		r.count("", dns.RcodeRefused)
		return true, nil
	}
	key := keyOf(q.name, q.qtype, q.qclass, q.do)
	if ans, age := r.cache.lookup(key, now); ans != nil {
		out, ok := appendReply(replies.buf(), ans, q, age)
		if ok {
			replies.push(out, client)
			r.count("cached", dns.RcodeSuccess)
		}
		return ok, nil
	}
	if len(r.ups) == 0 {
		return false, nil
	}
	pq := &pendingQuery{l: l, client: client, entry: entry, key: key}
	pq.buf = append(make([]byte, 0, len(q.question)+headerLen+len(q.name)+2+4+optLen), q.question...)
	pq.q = *q
	pq.q.question = pq.buf[:len(q.question)]
	// The upstream query follows the client's question in the same
	// buffer: one allocation per forwarded query.
	pq.buf = appendUpstreamQuery(pq.buf, q)
	return false, pq
}

func hasSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}

// upstreamWire is the query to send upstream.
func (pq *pendingQuery) upstreamWire() []byte { return pq.buf[len(pq.q.question):] }

// maxGeneral bounds the goroutines of the general path per listener; past
// it, datagrams are dropped (the client retries), as an overloaded server
// drops them.
const maxGeneral = 512

// general answers a datagram through Resolve, in a goroutine of its own:
// a slow upstream must not hold up the queries behind it.
func (l *udpListener) general(b []byte, client *net.UDPAddr) {
	select {
	case l.generalSlots <- struct{}{}:
	default:
		return
	}
	b = append([]byte(nil), b...)
	go func() {
		defer func() { <-l.generalSlots }()
		req := new(dns.Msg)
		if err := req.Unpack(b); err != nil {
			if len(b) < headerLen || b[2]&0x80 != 0 {
				return // not a query: nothing to answer
			}
			// What miekg/dns's server did: FORMERR, header only.
			m := new(dns.Msg)
			m.Id = req.Id
			m.Response, m.Rcode = true, dns.RcodeFormatError
			if out, err := m.Pack(); err == nil {
				_, _ = l.conn.WriteToUDP(out, client)
			}
			return
		}
		if req.Response {
			return
		}
		resp := l.r.Resolve(context.Background(), req, client.AddrPort())
		fitUDP(req, resp)
		if out, err := resp.Pack(); err == nil {
			_, _ = l.conn.WriteToUDP(out, client)
		}
	}()
}

// fitUDP truncates resp to what the client of req takes over UDP.
func fitUDP(req, resp *dns.Msg) {
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		size = max(int(opt.UDPSize()), dns.MinMsgSize)
	}
	if resp.Len() > size {
		resp.Compress = true
		resp.Truncate(size)
	}
}

// sendUpstream sends each query to its current upstream, in batches per
// upstream socket.
func (r *Resolver) sendUpstream(pqs []*pendingQuery) {
	type group struct {
		s   *upSock
		out outBatch
	}
	var groups []*group
	deadline := time.Now().Add(r.cfg.Timeout)
	for i, pq := range pqs {
		// pq is this goroutine's until u.sock publishes it; after that the
		// answer's reader or the timeout sweep may take it at any time, so
		// everything about it is set first, and only w is used after.
		u := r.ups[pq.up]
		last := i == len(pqs)-1 || pqs[i+1].up != pq.up
		if pq.sends > 0 {
			// A retry: the last batch may still be reading the old buffer.
			pq.buf = slices.Clone(pq.buf)
			pq.q.question = pq.buf[:len(pq.q.question)]
		}
		pq.sends++
		w := pq.upstreamWire()
		pq.sent = time.Now()
		// The name without its final dot: questionIs takes either, and
		// this one needs no new string.
		s, _, err := u.sock(waiter{q: dns.Question{Name: pq.q.name, Qtype: pq.q.qtype, Qclass: pq.q.qclass}, async: pq, wire: w, deadline: deadline}, last)
		if err != nil {
			r.upstreamFailed(pq, err)
			continue
		}
		var g *group
		for _, x := range groups {
			if x.s == s {
				g = x
			}
		}
		if g == nil {
			g = &group{s: s}
			groups = append(groups, g)
		}
		g.out.push(w, nil)
	}
	for _, g := range groups {
		if g.out.n > 0 {
			g.out.flush(g.s.batch)
		}
	}
}

// upstreamFailed moves pq to the next upstream, or answers SERVFAIL when
// none is left.
func (r *Resolver) upstreamFailed(pq *pendingQuery, err error) {
	if r.cfg.ObserveUpstream != nil && !pq.sent.IsZero() {
		r.cfg.ObserveUpstream(time.Since(pq.sent))
	}
	pq.errs = append(pq.errs, err)
	if pq.up+1 < len(r.ups) {
		pq.up++
		r.sendUpstream([]*pendingQuery{pq})
		return
	}
	r.event(Event{Kind: EventUpstreamFailed, Name: pq.q.name, QType: typeString(pq.q.qtype), Client: pq.client.AddrPort(), Reason: errors.Join(pq.errs...).Error()})
	r.count("", dns.RcodeServerFailure)
	out := appendEmptyReply(nil, &pq.q, dns.RcodeServerFailure)
	_, _ = pq.l.conn.WriteToUDP(out, pq.client)
}

// answered finishes pq with resp, its upstream's answer, queuing the reply
// on out (per listener).
func (r *Resolver) answered(pq *pendingQuery, resp *dns.Msg, out map[*udpListener]*outBatch) {
	if r.cfg.ObserveUpstream != nil {
		r.cfg.ObserveUpstream(time.Since(pq.sent))
	}
	ans, err := r.accept(pq.answerContext(), resp, r.cfg.Clock())
	r.reply(pq, ans, err == nil, out)
}

// answeredWire finishes pq with an answer acceptWire took: nothing was
// dropped from it, so what is left is to learn and cache it.
func (r *Resolver) answeredWire(pq *pendingQuery, ans *packedAnswer, learn []Learned, minTTL uint32, out map[*udpListener]*outBatch) {
	if r.cfg.ObserveUpstream != nil {
		r.cfg.ObserveUpstream(time.Since(pq.sent))
	}
	err := r.commit(pq.answerContext(), learn, ans, true, minTTL, r.cfg.Clock())
	r.reply(pq, ans, err == nil, out)
}

func (pq *pendingQuery) answerContext() answerContext {
	return answerContext{name: pq.q.name, qtype: pq.q.qtype, key: pq.key, allowPrivate: pq.entry.AllowPrivate, client: pq.client.AddrPort()}
}

// reply queues on out the reply to pq: ans, or SERVFAIL unless ok.
func (r *Resolver) reply(pq *pendingQuery, ans *packedAnswer, ok bool, out map[*udpListener]*outBatch) {
	o := out[pq.l]
	if o == nil {
		o = &outBatch{}
		out[pq.l] = o
	}
	if !ok {
		r.count("", dns.RcodeServerFailure)
		o.push(appendEmptyReply(o.buf(), &pq.q, dns.RcodeServerFailure), pq.client)
		return
	}
	r.count("forwarded", dns.RcodeSuccess)
	if b, ok := appendReply(o.buf(), ans, &pq.q, 0); ok {
		o.push(b, pq.client)
		return
	}
	// Too large for the client, or not packed: the general path's
	// reply, truncated as a UDP reply must be.
	req := new(dns.Msg)
	req.SetQuestion(dns.Fqdn(pq.q.name), pq.q.qtype)
	req.Id, req.RecursionDesired, req.CheckingDisabled = pq.q.id, pq.q.rd, pq.q.cd
	if err := unpackQuestionInto(req, pq.q.question); err != nil {
		return
	}
	if pq.q.edns {
		req.SetEdns0(uint16(min(pq.q.limit, 0xffff)), pq.q.do)
	}
	m := finish(req, ans.message())
	fitUDP(req, m)
	if b, err := m.PackBuffer(o.buf()); err == nil {
		o.push(b, pq.client)
	}
}

// unpackQuestionInto sets req's question to the client's own bytes (its
// letter case).
func unpackQuestionInto(req *dns.Msg, question []byte) error {
	name, _, err := dns.UnpackDomainName(question, 0)
	if err != nil {
		return err
	}
	req.Question[0].Name = name
	return nil
}

// retryTCP asks pq's upstream again over TCP after a truncated answer, and
// finishes pq with that answer.
func (pq *pendingQuery) retryTCP(truncated *dns.Msg) {
	r := pq.l.r
	u := r.ups[pq.up]
	q := new(dns.Msg)
	if err := q.Unpack(pq.upstreamWire()); err != nil {
		r.upstreamFailed(pq, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
	defer cancel()
	resp, err := u.exchangeTCP(ctx, q)
	if err != nil {
		r.upstreamFailed(pq, err)
		return
	}
	out := map[*udpListener]*outBatch{}
	r.answered(pq, resp, out)
	for l, o := range out {
		o.flush(l.batch)
	}
}

// sweepLoop fails fast-path queries whose upstream did not answer in
// time, every tick.
func (r *Resolver) sweepLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(sweepInterval(r.cfg.Timeout))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			for _, u := range r.ups {
				for _, pq := range u.expired(now) {
					r.upstreamFailed(pq, fmt.Errorf("upstream %s: no answer within %v", u.addr, r.cfg.Timeout))
				}
			}
		}
	}
}

// sweepInterval is how often timeouts are checked: a query fails between
// Timeout and Timeout plus this.
func sweepInterval(timeout time.Duration) time.Duration {
	return min(max(timeout/8, 5*time.Millisecond), 100*time.Millisecond)
}
