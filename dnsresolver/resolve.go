// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/allowlist"
)

// Resolve computes the reply to req from client. It never returns nil.
func (r *Resolver) Resolve(ctx context.Context, req *dns.Msg, client netip.AddrPort) *dns.Msg {
	m, how, _ := r.resolve(ctx, req, client, nil)
	r.count(how, m.Rcode)
	return m
}

// count records an answered query: how it was answered ("cached",
// "forwarded", "local", or "" to judge by rcode).
func (r *Resolver) count(how string, rcode int) {
	switch how {
	case "cached":
		r.stats.Cached.Add(1)
	case "forwarded":
		r.stats.Forwarded.Add(1)
	case "local":
		r.stats.Local.Add(1)
	default:
		how = "other"
		switch rcode {
		case dns.RcodeRefused:
			r.stats.Refused.Add(1)
			how = "refused"
		case dns.RcodeServerFailure:
			r.stats.Servfail.Add(1)
			how = "servfail"
		}
	}
	if r.cfg.OnQuery != nil {
		r.cfg.OnQuery(how)
	}
}

// resolve is Resolve without the counting; for an answer that is an error
// (REFUSED, SERVFAIL...) it also says why, for in-process callers
// (LookupNetIP) that have no event stream to read it from.
// dropped, if not nil, collects what the rebinding filter removed from a
// fresh answer.
func (r *Resolver) resolve(ctx context.Context, req *dns.Msg, client netip.AddrPort, dropped *[]Dropped) (*dns.Msg, string, error) {
	if req.Opcode != dns.OpcodeQuery {
		return reply(req, dns.RcodeNotImplemented), "", errors.New("only standard queries are answered")
	}
	if len(req.Question) != 1 {
		return reply(req, dns.RcodeFormatError), "", errors.New("a query must ask one question")
	}
	q := req.Question[0]
	qtype := typeString(q.Qtype)
	name, err := allowlist.NormalizeName(q.Name)
	if err != nil || q.Qclass != dns.ClassINET {
		reason := "not a valid host name"
		if err == nil {
			reason = "only class IN is answered"
		}
		r.event(Event{Kind: EventRefused, Name: printable(q.Name), QType: qtype, Client: client, Reason: reason})
		return reply(req, dns.RcodeRefused), "", fmt.Errorf("%w: %s: %s", ErrRefused, printable(q.Name), reason)
	}
	// name is normalised already: no second pass through IsLoopbackName.
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return localhostReply(req), "local", nil
	}
	if q.Qtype == dns.TypePTR {
		m := r.ptr(req, name, client)
		if m.Rcode == dns.RcodeSuccess {
			return m, "local", nil
		}
		return m, "", fmt.Errorf("%w: reverse lookups are answered only for addresses this session learned", ErrRefused)
	}

	entry, ok := r.policy.Load().MatchName(name)
	if !ok && r.extraAllowed(name) {
		ok = true
	}
	if !ok && r.cfg.Ask != nil && !r.cfg.Audit && r.ask(ctx, AskQuery{Name: name, QType: qtype, Client: client}) {
		ok = true
	}
	if !ok {
		r.event(Event{Kind: EventRefused, Audit: r.cfg.Audit, Name: name, QType: qtype, Client: client, Reason: ReasonNotAllowed})
		if !r.cfg.Audit {
			return reply(req, dns.RcodeRefused), "", fmt.Errorf("%w: %s is %s", ErrRefused, name, ReasonNotAllowed)
		}
	}
	fqdn := dns.Fqdn(name)
	do := false
	if opt := req.IsEdns0(); opt != nil {
		do = opt.Do()
	}
	key := keyOf(name, q.Qtype, q.Qclass, do)
	now := r.cfg.Clock()
	if m := r.cache.get(key, now); m != nil {
		return finishOwned(req, m), "cached", nil // m is already a private copy
	}

	up := new(dns.Msg)
	up.SetQuestion(fqdn, q.Qtype)
	up.RecursionDesired = req.RecursionDesired
	up.CheckingDisabled = req.CheckingDisabled
	up.SetEdns0(upstreamUDPSize, do)
	// The deadline only matters when forwarding: set it here, not for
	// every cache hit.
	fctx, cancel := context.WithTimeout(ctx, time.Duration(len(r.ups)+1)*r.cfg.Timeout)
	defer cancel()
	resp, err := r.forward(fctx, up)
	if err != nil {
		r.event(Event{Kind: EventUpstreamFailed, Name: name, QType: qtype, Client: client, Reason: err.Error()})
		return reply(req, dns.RcodeServerFailure), "", err
	}

	ans, err := r.accept(answerContext{name: name, qtype: q.Qtype, key: key, allowPrivate: entry.AllowPrivate, client: client, dropped: dropped}, resp, now)
	if err != nil {
		return reply(req, dns.RcodeServerFailure), "", err
	}
	return finish(req, ans.message()), "forwarded", nil
}

// answerContext is what accept needs to know about the query an upstream
// answered.
type answerContext struct {
	name         string // normalised
	qtype        uint16
	key          cacheKey
	allowPrivate bool // the matching entry's
	client       netip.AddrPort
	dropped      *[]Dropped // if not nil, receives what the filter removed
}

// accept filters resp, an upstream's answer, clamps its TTLs, teaches the
// datapath its addresses and caches it; the packed answer is what the
// client may be told. An error means the answer must become a SERVFAIL
// (the per-name cap or the map is full; the event is raised here).
func (r *Resolver) accept(c answerContext, resp *dns.Msg, now time.Duration) (ans *packedAnswer, err error) {
	fqdn := dns.Fqdn(c.name)
	allowPrivate := c.allowPrivate
	if r.cfg.Audit {
		// Report what would be dropped, then keep everything.
		_, dropped := FilterAnswer(resp.Copy(), fqdn, allowPrivate)
		for _, d := range dropped {
			r.event(Event{Kind: EventRebinding, Audit: true, Name: d.Name, QType: typeString(c.qtype), Addr: d.Addr, Client: c.client, Reason: d.Why})
		}
		allowPrivate = true
	}
	learn, dropped := FilterAnswer(resp, fqdn, allowPrivate)
	if c.dropped != nil {
		*c.dropped = append(*c.dropped, dropped...)
	}
	for _, d := range dropped {
		r.event(Event{Kind: EventRebinding, Name: d.Name, QType: typeString(c.qtype), Addr: d.Addr, Client: c.client, Reason: d.Why})
	}

	// Clamp TTLs: a client must not cache an answer longer than the kernel
	// keeps its addresses.
	maxTTL := uint32(r.cfg.MaxTTL / time.Second)
	cacheTTL := maxTTL
	for _, sec := range [][]dns.RR{resp.Answer, resp.Ns} {
		for _, rr := range sec {
			h := rr.Header()
			h.Ttl = min(h.Ttl, maxTTL)
			if soa, ok := rr.(*dns.SOA); ok {
				h.Ttl = min(h.Ttl, soa.Minttl)
			}
			cacheTTL = min(cacheTTL, h.Ttl)
		}
	}
	if len(resp.Answer)+len(resp.Ns) == 0 {
		cacheTTL = 0
	}

	// An answer that does not pack (it unpacked, so this is unexpected)
	// is still given to the client through the general path, uncached.
	ans, perr := packAnswer(resp)
	cacheable := perr == nil && (resp.Rcode == dns.RcodeSuccess || resp.Rcode == dns.RcodeNameError)
	if perr != nil {
		ans = &packedAnswer{}
		ans.once.Do(func() { ans.msg = resp })
	}
	if err := r.commit(c, learn, ans, cacheable, cacheTTL, now); err != nil {
		return nil, err
	}
	return ans, nil
}

// commit teaches the datapath the addresses of an accepted answer, then
// caches it for cacheTTL seconds if cacheable. An error means SERVFAIL
// (the per-name cap or the map is full; the event is raised here).
func (r *Resolver) commit(c answerContext, learn []Learned, ans *packedAnswer, cacheable bool, cacheTTL uint32, now time.Duration) error {
	maxTTL := uint32(r.cfg.MaxTTL / time.Second)
	minTTL := uint32(r.cfg.MinTTL / time.Second)
	if len(learn) > 0 {
		var addrBuf [8]netip.Addr
		var expBuf [8]time.Duration
		addrs, expires := addrBuf[:0], expBuf[:0]
		for _, l := range learn {
			ttl := min(max(l.TTL, minTTL), maxTTL)
			addrs = append(addrs, l.Addr)
			expires = append(expires, now+time.Duration(ttl)*time.Second+r.cfg.Grace)
		}
		if err := r.learned.learn(r.cfg.Learner, c.name, now, addrs, expires, r.cfg.MaxIPsPerName, r.cfg.Grace/2); err != nil {
			kind := EventMapFull
			if errors.Is(err, ErrCapReached) {
				kind = EventCapReached
			}
			r.event(Event{Kind: kind, Name: c.name, QType: typeString(c.qtype), Client: c.client, Reason: err.Error()})
			return err
		}
	}
	if cacheable {
		r.cache.put(c.key, ans, now, time.Duration(cacheTTL)*time.Second)
	}
	return nil
}

// typeString names a query type for events.
func typeString(t uint16) string {
	if s := dns.TypeToString[t]; s != "" {
		return s
	}
	return "TYPE" + strconv.Itoa(int(t))
}

// forward asks each upstream in turn until one answers.
func (r *Resolver) forward(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	if len(r.ups) == 0 {
		return nil, ErrNoUpstream
	}
	var errs []error
	for _, u := range r.ups {
		start := time.Now()
		resp, err := u.exchange(ctx, q)
		if r.cfg.ObserveUpstream != nil {
			r.cfg.ObserveUpstream(time.Since(start))
		}
		if err == nil {
			return resp, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// ptr answers a reverse query from the addresses the session learned.
func (r *Resolver) ptr(req *dns.Msg, name string, client netip.AddrPort) *dns.Msg {
	addr, ok := reverseAddr(name)
	if ok {
		names, ttl := r.learned.namesOf(addr, r.cfg.Clock())
		if len(names) > 0 {
			m := reply(req, dns.RcodeSuccess)
			for _, n := range names {
				m.Answer = append(m.Answer, &dns.PTR{
					Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: uint32(ttl / time.Second)},
					Ptr: dns.Fqdn(n),
				})
			}
			return m
		}
	}
	r.event(Event{Kind: EventRefused, Name: name, QType: "PTR", Client: client, Reason: "reverse lookups are answered only for addresses this session learned"})
	return reply(req, dns.RcodeRefused)
}

// reverseAddr parses an in-addr.arpa or ip6.arpa name.
func reverseAddr(name string) (netip.Addr, bool) {
	name = strings.TrimSuffix(name, ".")
	switch {
	case strings.HasSuffix(name, ".in-addr.arpa"):
		parts := strings.Split(strings.TrimSuffix(name, ".in-addr.arpa"), ".")
		if len(parts) != 4 {
			return netip.Addr{}, false
		}
		for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
			parts[i], parts[j] = parts[j], parts[i]
		}
		a, err := netip.ParseAddr(strings.Join(parts, "."))
		return a, err == nil && a.Is4()
	case strings.HasSuffix(name, ".ip6.arpa"):
		nibbles := strings.Split(strings.TrimSuffix(name, ".ip6.arpa"), ".")
		if len(nibbles) != 32 {
			return netip.Addr{}, false
		}
		var b strings.Builder
		for i := 31; i >= 0; i-- {
			if len(nibbles[i]) != 1 {
				return netip.Addr{}, false
			}
			b.WriteString(nibbles[i])
			if i%4 == 0 && i > 0 {
				b.WriteByte(':')
			}
		}
		a, err := netip.ParseAddr(b.String())
		return a, err == nil
	}
	return netip.Addr{}, false
}

// localhostReply answers localhost names with loopback, as RFC 6761 asks,
// without forwarding anything.
func localhostReply(req *dns.Msg) *dns.Msg {
	m := reply(req, dns.RcodeSuccess)
	q := req.Question[0]
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 3600}
	switch q.Qtype {
	case dns.TypeA:
		hdr.Rrtype = dns.TypeA
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.IPv4(127, 0, 0, 1)})
	case dns.TypeAAAA:
		hdr.Rrtype = dns.TypeAAAA
		m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: net.IPv6loopback})
	}
	return m
}

// reply is an empty answer to req with rcode.
func reply(req *dns.Msg, rcode int) *dns.Msg {
	m := new(dns.Msg)
	m.SetRcode(req, rcode)
	m.RecursionAvailable = true
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(upstreamUDPSize, opt.Do())
	}
	return m
}

// finish turns a (cached or fresh) upstream answer into the reply to req:
// the client's ID and question (with its letter case), our EDNS0.
func finish(req *dns.Msg, resp *dns.Msg) *dns.Msg { return finishOwned(req, resp.Copy()) }

// finishOwned is finish for a message the caller owns: no second copy on
// the cache-hit path.
func finishOwned(req *dns.Msg, m *dns.Msg) *dns.Msg {
	m.Id = req.Id
	m.Response = true
	m.Opcode = req.Opcode
	m.RecursionDesired = req.RecursionDesired
	m.RecursionAvailable = true
	m.Question = req.Question
	// Compression costs a map per pack; ServeDNS turns it on only for a
	// UDP answer that would not fit otherwise.
	m.Compress = false
	extra := m.Extra[:0]
	for _, rr := range m.Extra {
		if _, ok := rr.(*dns.OPT); !ok {
			extra = append(extra, rr)
		}
	}
	m.Extra = extra
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(upstreamUDPSize, opt.Do())
	}
	return m
}

// printable keeps an invalid query name readable and bounded in logs.
func printable(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}
