// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"net/netip"
	"time"
)

// Adopt tells a resolver what its session learned before it existed: the
// addresses in the datapath's map, with their expiries, that a previous
// process (a daemon before its restart) taught it. The datapath already
// has them, so nothing is written; the resolver only files them, so that
// its garbage collector forgets each one when it expires, as it does its
// own. Without that, they stay in the shared, bounded map until the
// session ends, and long sessions across restarts fill it (every session's
// new answers then get SERVFAIL).
//
// The names they were learned for are not in the map, so an adopted
// address counts against no name's cap, answers no PTR query, and is
// forgotten by the next Prune (a policy change), whatever names the new
// policy allows: the session asks again and learns it anew.
func (r *Resolver) Adopt(learned map[netip.Addr]time.Duration) {
	s := r.learned
	s.mu.Lock()
	defer s.mu.Unlock()
	for a, exp := range learned {
		a = a.Unmap()
		e := s.addrs[a]
		if e == nil {
			e = &learnedAddr{}
			s.addrs[a] = e
		}
		if e.expires < exp {
			e.expires = exp
		}
		s.file(e.expires, wheelItem{addr: a})
	}
}
