// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/addrclass"
)

// maxChain bounds how many CNAMEs are followed: a loop or an absurdly long
// chain in a hostile answer ends there.
const maxChain = 16

// Learned is an address of the answer that the session may reach.
type Learned struct {
	Addr netip.Addr
	TTL  uint32 // as answered, before clamping
}

// Dropped is an address removed from the answer, and why.
type Dropped struct {
	Name string
	Addr netip.Addr
	Why  string
}

// FilterAnswer rewrites resp, an upstream answer to a question for qname
// (lower-case, fully qualified), so that it holds only what the session may
// use: the CNAME chain that starts at qname, the A/AAAA records of its names
// that are not rebinding addresses (unless allowPrivate), and the other
// record types of those names. SVCB/HTTPS address hints and ECH configs
// are stripped. It
// returns the addresses to learn and those it dropped. The authority and
// additional sections are emptied of everything but the OPT and SOA
// records: glue would be unlearned addresses.
func FilterAnswer(resp *dns.Msg, qname string, allowPrivate bool) (learn []Learned, dropped []Dropped) {
	// The chain is at most maxChain+1 names: a slice scanned with
	// EqualFold costs less than a map built for every answer.
	var chainBuf [maxChain + 1]string
	chain := append(chainBuf[:0], qname)
	inChain := func(name string) bool {
		for _, c := range chain {
			if strings.EqualFold(c, name) {
				return true
			}
		}
		return false
	}
	cur := qname
	for range maxChain {
		next := ""
		for _, rr := range resp.Answer {
			if c, ok := rr.(*dns.CNAME); ok && strings.EqualFold(c.Hdr.Name, cur) {
				next = strings.ToLower(dns.Fqdn(c.Target))
				break
			}
		}
		if next == "" || inChain(next) {
			break
		}
		chain = append(chain, next)
		cur = next
	}

	kept := resp.Answer[:0]
	for _, rr := range resp.Answer {
		if !inChain(rr.Header().Name) {
			continue
		}
		owner := strings.ToLower(rr.Header().Name)
		var addr netip.Addr
		switch r := rr.(type) {
		case *dns.A:
			addr, _ = netip.AddrFromSlice(r.A.To4())
		case *dns.AAAA:
			addr, _ = netip.AddrFromSlice(r.AAAA.To16())
		case *dns.SVCB:
			r.Value = stripHints(r.Value)
		case *dns.HTTPS:
			r.Value = stripHints(r.Value)
		}
		if _, isA := rr.(*dns.A); isA || isAAAA(rr) {
			// An empty RDATA unpacks to no address: never learned,
			// whatever allowPrivate says.
			if why, bad := addrclass.Rebinding(addr); bad && (!allowPrivate || !addr.IsValid()) {
				dropped = append(dropped, Dropped{Name: owner, Addr: addr, Why: why})
				continue
			}
			learn = append(learn, Learned{Addr: addr.Unmap(), TTL: rr.Header().Ttl})
		}
		kept = append(kept, rr)
	}
	resp.Answer = kept

	ns := resp.Ns[:0]
	for _, rr := range resp.Ns {
		if _, ok := rr.(*dns.SOA); ok {
			ns = append(ns, rr)
		}
	}
	resp.Ns = ns
	extra := resp.Extra[:0]
	for _, rr := range resp.Extra {
		if _, ok := rr.(*dns.OPT); ok {
			extra = append(extra, rr)
		}
	}
	resp.Extra = extra
	return learn, dropped
}

func isAAAA(rr dns.RR) bool {
	_, ok := rr.(*dns.AAAA)
	return ok
}

// stripHints removes the address hints (unlearned addresses) and the ech
// parameter of an SVCB/HTTPS record. Without an ECH config a client sends
// its real SNI in the clear, which the session's verifier checks
// (package namecheck); with one, the name the server routes by would be
// encrypted. ech is also taken out of a "mandatory" list, which would
// otherwise tell the client to ignore the record.
func stripHints(kv []dns.SVCBKeyValue) []dns.SVCBKeyValue {
	out := kv[:0]
	for _, v := range kv {
		switch m := v.(type) {
		case *dns.SVCBIPv4Hint, *dns.SVCBIPv6Hint, *dns.SVCBECHConfig:
			continue
		case *dns.SVCBMandatory:
			keys := m.Code[:0]
			for _, k := range m.Code {
				if k != dns.SVCB_IPV4HINT && k != dns.SVCB_IPV6HINT && k != dns.SVCB_ECHCONFIG {
					keys = append(keys, k)
				}
			}
			if len(keys) == 0 {
				continue
			}
			m.Code = keys
		}
		out = append(out, v)
	}
	return out
}
