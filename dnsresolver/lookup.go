// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"context"
	"errors"
	"net"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/addrclass"
)

// ErrRefused is wrapped by LookupNetIP's error when the session's
// resolver refuses the name (not allowed, or not a valid host name).
var ErrRefused = errors.New("refused by the session's resolver")

// LookupNetIP resolves host, a normalised host name, for a client inside
// sluice itself: the session's allowlist proxy. The name goes through
// exactly what a query from the session's programs goes through, the UDP
// fast path aside: the session's policy (a name it does not allow is
// refused, never forwarded), its upstreams (--dns-upstream or the daemon's
// settings, never the host's resolver unless that is what the session
// uses), its rebinding filter (addrclass), its learned set (the addresses
// are in the datapath before they are returned) and its cache (an answer a
// program got is the answer the proxy gets, and the other way round).
//
// A and AAAA are asked at once; IPv4 addresses come first, then IPv6,
// each in the order of the answer. When one of the two fails and the other
// has addresses, those are returned. A name that exists nowhere is a
// *net.DNSError with IsNotFound. When the rebinding filter removed every
// address of the answers it just received, the error is an
// *addrclass.RefusedError that names them. (An answer the filter left
// empty is not cached. One that kept other records, a CNAME say, is, and
// the cache keeps no record of what was removed: from the cache such a
// name, like a name without addresses, gives no addresses and no error;
// the resolver's events said what was dropped when the answer arrived.)
func (r *Resolver) LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	type result struct {
		m       *dns.Msg
		err     error
		dropped []Dropped
	}
	var res [2]result
	done := make(chan struct{})
	ask := func(i int, qtype uint16) {
		req := new(dns.Msg)
		req.SetQuestion(dns.Fqdn(host), qtype)
		req.RecursionDesired = true
		// No client address: nothing of the session sent this.
		var dropped []Dropped
		m, how, err := r.resolve(ctx, req, netip.AddrPort{}, &dropped)
		r.count(how, m.Rcode)
		res[i] = result{m, err, dropped}
	}
	go func() {
		defer close(done)
		ask(1, dns.TypeAAAA)
	}()
	ask(0, dns.TypeA)
	<-done

	var addrs []netip.Addr
	var errs []error
	var refused []addrclass.Refusal
	notFound := 0
	for _, x := range res {
		for _, d := range x.dropped {
			refused = append(refused, addrclass.Refusal{Addr: d.Addr, Why: d.Why})
		}
		switch {
		case x.err != nil:
			errs = append(errs, x.err)
		case x.m.Rcode == dns.RcodeNameError:
			notFound++
		case x.m.Rcode != dns.RcodeSuccess:
			errs = append(errs, errors.New(dns.RcodeToString[x.m.Rcode]))
		default:
			addrs = append(addrs, answerAddrsOf(x.m)...)
		}
	}
	switch {
	case len(addrs) > 0:
		return addrs, nil
	case len(refused) > 0:
		return nil, &addrclass.RefusedError{Name: host, Refused: refused}
	case len(errs) > 0:
		// Both questions are refused alike; say it once.
		if len(errs) == 2 && errs[0].Error() == errs[1].Error() {
			errs = errs[:1]
		}
		return nil, errors.Join(errs...)
	case notFound > 0:
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return nil, nil
}

// answerAddrsOf lists the A and AAAA addresses of a filtered answer: after
// FilterAnswer, every one of them belongs to the asked name's CNAME chain.
func answerAddrsOf(m *dns.Msg) []netip.Addr {
	var out []netip.Addr
	for _, rr := range m.Answer {
		var a netip.Addr
		switch r := rr.(type) {
		case *dns.A:
			a, _ = netip.AddrFromSlice(r.A.To4())
		case *dns.AAAA:
			a, _ = netip.AddrFromSlice(r.AAAA.To16())
		default:
			continue
		}
		if a.IsValid() {
			out = append(out, a.Unmap())
		}
	}
	return out
}
