// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"sync"
	"time"

	"github.com/miekg/dns"
)

// cacheKey identifies an answer: the question and the DNSSEC-OK bit, which
// changes what the upstream returns.
type cacheKey struct {
	name  string
	qtype uint16
	class uint16
	do    bool
}

type cacheEntry struct {
	ans     *packedAnswer // filtered, as first answered
	stored  time.Duration
	expires time.Duration
}

// cache holds filtered answers for their clamped TTL, bounded in size.
// When full, one arbitrary entry makes room (Go's map iteration starts at
// a random place): constant time, where a sweep of the whole cache under
// the lock every query takes serialised the resolver. Expired entries are
// swept by the garbage collector's tick instead.
type cache struct {
	mu  sync.RWMutex
	max int
	m   map[cacheKey]*cacheEntry
}

func newCache(max int) *cache { return &cache{max: max, m: map[cacheKey]*cacheEntry{}} }

// lookup returns the cached answer and its age in whole seconds.
func (c *cache) lookup(k cacheKey, now time.Duration) (*packedAnswer, uint32) {
	c.mu.RLock()
	e := c.m[k]
	c.mu.RUnlock()
	if e == nil || e.expires <= now {
		return nil, 0
	}
	return e.ans, uint32((now - e.stored) / time.Second)
}

// get returns a copy of the cached answer with TTLs reduced by its age.
func (c *cache) get(k cacheKey, now time.Duration) *dns.Msg {
	ans, age := c.lookup(k, now)
	if ans == nil {
		return nil
	}
	return aged(ans.message(), age)
}

// aged is a copy of m with TTLs reduced by age seconds.
func aged(m *dns.Msg, age uint32) *dns.Msg {
	m = m.Copy()
	for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
		for _, rr := range sec {
			h := rr.Header()
			if h.Ttl > age {
				h.Ttl -= age
			} else {
				h.Ttl = 0
			}
		}
	}
	return m
}

func (c *cache) put(k cacheKey, a *packedAnswer, now, ttl time.Duration) {
	if ttl <= 0 || c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for kk := range c.m {
			delete(c.m, kk)
			break
		}
	}
	// Answers are never modified once packed, and get hands out copies.
	c.m[k] = &cacheEntry{ans: a, stored: now, expires: now + ttl}
}

// keyOf is the key of a question for name, normalised (lower case, no
// trailing dot).
func keyOf(name string, qtype, class uint16, do bool) cacheKey {
	return cacheKey{name: name, qtype: qtype, class: class, do: do}
}

// sweep drops expired entries; the garbage collector calls it.
func (c *cache) sweep(now time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if e.expires <= now {
			delete(c.m, k)
		}
	}
}
