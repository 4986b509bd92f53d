package dnsresolver

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// Learner is the datapath as the resolver sees it: a session's learned-IP
// map with expiries on the datapath's clock.
type Learner interface {
	Learn(addr netip.Addr, expires time.Duration) error
	Forget(addr netip.Addr) error
}

// ErrCapReached says a name already has MaxIPsPerName learned addresses.
var ErrCapReached = errors.New("per-name cap on learned addresses reached")

// learnedSet mirrors what this session taught the datapath, so that an
// expiry only grows (one syscall per new or extended address, none on a
// repeat), names can be counted against the cap and PTR queries answered.
type learnedSet struct {
	mu      sync.Mutex
	addrs   map[netip.Addr]*learnedAddr
	perName map[string]map[netip.Addr]time.Duration
}

type learnedAddr struct {
	expires time.Duration
	names   map[string]bool
}

func newLearnedSet() *learnedSet {
	return &learnedSet{addrs: map[netip.Addr]*learnedAddr{}, perName: map[string]map[netip.Addr]time.Duration{}}
}

// learn records that name resolved to addrs, each valid until its expiry,
// teaching l first. It refuses (learning nothing) when the name would hold
// more than limit unexpired addresses.
func (s *learnedSet) learn(l Learner, name string, now time.Duration, addrs []netip.Addr, expires []time.Duration, limit int, slack time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.perName[name]
	n := 0
	for a, exp := range cur {
		if exp > now {
			n++
		} else {
			delete(cur, a)
		}
	}
	seen := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		if exp, ok := cur[a]; (!ok || exp <= now) && !seen[a] {
			n++
		}
		seen[a] = true // an address repeated in one answer counts once
	}
	if limit > 0 && n > limit {
		return fmt.Errorf("%w: %s would have %d (cap %d)", ErrCapReached, name, n, limit)
	}
	if cur == nil {
		cur = map[netip.Addr]time.Duration{}
		s.perName[name] = cur
	}
	for i, a := range addrs {
		exp := expires[i]
		e := s.addrs[a]
		// Extend a live entry only when it would end noticeably sooner:
		// every answer for a popular address would otherwise cost a map
		// update. The slack stays under half the grace period, so a client
		// using the answer until its TTL ends is still inside the expiry.
		if e == nil || e.expires < exp-slack {
			if l != nil {
				if err := l.Learn(a, exp); err != nil {
					return err
				}
			}
			if e == nil {
				e = &learnedAddr{names: map[string]bool{}}
				s.addrs[a] = e
			}
			e.expires = exp
		}
		e.names[name] = true
		if cur[a] < exp {
			cur[a] = exp
		}
	}
	return nil
}

// namesOf returns the names an unexpired address was learned from.
func (s *learnedSet) namesOf(a netip.Addr, now time.Duration) (names []string, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.addrs[a]
	if e == nil || e.expires <= now {
		return nil, 0
	}
	for n := range e.names {
		names = append(names, n)
	}
	return names, e.expires - now
}

// gc forgets expired addresses in l and in the mirror.
func (s *learnedSet) gc(l Learner, now time.Duration) (removed int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for a, e := range s.addrs {
		if e.expires > now {
			continue
		}
		if l != nil {
			if err := l.Forget(a); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		delete(s.addrs, a)
		removed++
	}
	for name, m := range s.perName {
		for a, exp := range m {
			if exp <= now {
				delete(m, a)
			}
		}
		if len(m) == 0 {
			delete(s.perName, name)
		}
	}
	return removed, errors.Join(errs...)
}

// size is the number of addresses in the mirror.
func (s *learnedSet) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.addrs)
}
