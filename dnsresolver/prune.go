// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import "net/netip"

// Prune forgets the learned addresses that no name the current policy
// still allows was answered with, and empties the cache: after a policy
// change, new connects to a removed host fail at once instead of at the
// TTL's end. It goes by the names' own lists of addresses, which are
// complete (an address's list of names is not).
func (r *Resolver) Prune() {
	p := r.policy.Load()
	s := r.learned
	s.mu.Lock()
	keep := map[netip.Addr]bool{}
	for name, uses := range s.perName {
		if _, ok := p.MatchName(name); !ok {
			delete(s.perName, name)
			continue
		}
		for _, u := range uses {
			keep[u.addr] = true
		}
	}
	for a := range s.addrs {
		if keep[a] {
			continue
		}
		if r.cfg.Learner != nil && r.cfg.Learner.Forget(a) != nil {
			continue
		}
		delete(s.addrs, a)
	}
	for _, e := range s.addrs {
		names := e.names[:0]
		for _, n := range e.names {
			if _, ok := s.perName[n]; ok {
				names = append(names, n)
			}
		}
		e.names = names
	}
	s.mu.Unlock()
	r.cache.mu.Lock()
	clear(r.cache.m)
	r.cache.mu.Unlock()
}
