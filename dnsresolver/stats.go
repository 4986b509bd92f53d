// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"net/netip"
	"slices"
	"sync/atomic"
)

// Stats are the resolver's counters, read by the metrics exporter.
type Stats struct {
	Forwarded atomic.Uint64 // answered by an upstream
	Cached    atomic.Uint64 // answered from the cache
	Refused   atomic.Uint64 // not allowed (or invalid)
	Servfail  atomic.Uint64 // upstream failure, cap or map full
	Local     atomic.Uint64 // localhost and PTR answered locally
}

// Stats returns the resolver's live counters.
func (r *Resolver) Stats() *Stats { return &r.stats }

// LearnedFrom names names addr was learned from (a few, when many names
// share it), expired or not (until the garbage collector forgets it): an
// audit line for a refused connect says which host name the address
// belonged to.
func (r *Resolver) LearnedFrom(addr netip.Addr) []string {
	r.learned.mu.Lock()
	defer r.learned.mu.Unlock()
	e := r.learned.addrs[addr.Unmap()]
	if e == nil {
		return nil
	}
	return slices.Clone(e.names)
}
