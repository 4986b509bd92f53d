// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Learner is the datapath as the resolver sees it: a session's learned-IP
// map with expiries on the datapath's clock.
type Learner interface {
	Learn(addr netip.Addr, expires time.Duration) error
	Forget(addr netip.Addr) error
}

// PortLearner is a Learner whose addresses carry the port rule of the
// name they were learned for: Teach is called for every address of every
// answer, before Learn, with the name asked for, whether or not the
// address needs learning again (a second name may widen its rule).
type PortLearner interface {
	Teach(addr netip.Addr, name string) error
}

// NameLearner is a Learner that also hears which name taught an address
// (the first time that name does): the datapath keeps the verify rule of
// the name's entry per address.
type NameLearner interface {
	LearnName(addr netip.Addr, name string) error
}

// ErrCapReached says a name already has MaxIPsPerName learned addresses.
var ErrCapReached = errors.New("per-name cap on learned addresses reached")

// learnedSet mirrors what this session taught the datapath, so that an
// expiry only grows (one syscall per new or extended address, none on a
// repeat), names can be counted against the cap and PTR queries answered.
//
// Expiries are also filed by the second they fall in (wheel), so that the
// garbage collector visits only what expired: a pass over every name under
// the lock stalled every answer for tens of milliseconds once a session had
// asked a few hundred thousand names.
type learnedSet struct {
	mu      sync.Mutex
	addrs   map[netip.Addr]*learnedAddr
	perName map[string][]nameUse // short: a slice costs less than a map per name
	wheel   map[int64][]wheelItem
	oldest  int64 // no wheel second below this holds items
}

// nameUse is a name's use of an address, until its expiry.
type nameUse struct {
	addr    netip.Addr
	expires time.Duration
}

// find returns the index of a in uses, or -1.
func find(uses []nameUse, a netip.Addr) int {
	for i, u := range uses {
		if u.addr == a {
			return i
		}
	}
	return -1
}

// wheelItem is an expiry to check: the address's own (name "") or the
// name's use of it. It may be stale (extended since, or forgotten): the
// collector checks before it removes anything.
type wheelItem struct {
	name string
	addr netip.Addr
}

// file adds it to the wheel at exp; s.mu is held.
func (s *learnedSet) file(exp time.Duration, it wheelItem) {
	sec := int64(exp / time.Second)
	if len(s.wheel) == 0 || sec < s.oldest {
		s.oldest = sec
	}
	s.wheel[sec] = append(s.wheel[sec], it)
}

type learnedAddr struct {
	expires time.Duration
	// names are some of the names the address was learned from, for
	// PTR answers and audit lines: at most maxNamesPerAddr, because behind
	// a CDN one address serves a great many names, and a map of them all
	// cost more per answer than the rest of learning.
	names []string
}

// maxNamesPerAddr bounds learnedAddr.names.
const maxNamesPerAddr = 8

func newLearnedSet() *learnedSet {
	return &learnedSet{addrs: map[netip.Addr]*learnedAddr{}, perName: map[string][]nameUse{}, wheel: map[int64][]wheelItem{}}
}

// learn records that name resolved to addrs, each valid until its expiry,
// teaching l first. It refuses (learning nothing) when the name would hold
// more than limit unexpired addresses.
func (s *learnedSet) learn(l Learner, name string, now time.Duration, addrs []netip.Addr, expires []time.Duration, limit int, slack time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := slices.DeleteFunc(s.perName[name], func(u nameUse) bool { return u.expires <= now })
	n := len(cur)
	for i, a := range addrs {
		// An address repeated in one answer counts once (answers are
		// short: a scan costs less than a map).
		if find(cur, a) < 0 && !slices.Contains(addrs[:i], a) {
			n++
		}
	}
	defer func() {
		if len(cur) == 0 {
			delete(s.perName, name)
		} else {
			s.perName[name] = cur
		}
	}()
	if limit > 0 && n > limit {
		return fmt.Errorf("%w: %s would have %d (cap %d)", ErrCapReached, name, n, limit)
	}
	pl, _ := l.(PortLearner)
	for i, a := range addrs {
		exp := expires[i]
		e := s.addrs[a]
		if pl != nil {
			if err := pl.Teach(a, name); err != nil {
				return err
			}
		}
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
				e = &learnedAddr{}
				s.addrs[a] = e
			}
			e.expires = exp
			s.file(exp, wheelItem{addr: a})
		}
		if len(e.names) < maxNamesPerAddr && !slices.Contains(e.names, name) {
			e.names = append(e.names, name)
		}
		switch j := find(cur, a); {
		case j < 0:
			if nl, ok := l.(NameLearner); ok {
				if err := nl.LearnName(a, name); err != nil {
					return err
				}
			}
			cur = append(cur, nameUse{addr: a, expires: exp})
		case cur[j].expires < exp:
			cur[j].expires = exp
		default:
			continue
		}
		s.file(exp, wheelItem{name: name, addr: a})
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
	return slices.Clone(e.names), e.expires - now
}

// gc forgets expired addresses in l and in the mirror, and expired uses of
// an address by a name. It visits the wheel's seconds up to now only.
func (s *learnedSet) gc(l Learner, now time.Duration) (removed int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	var retry []wheelItem
	last := int64(now / time.Second)
	for sec := s.oldest; sec <= last && len(s.wheel) > 0; sec++ {
		items, ok := s.wheel[sec]
		if !ok {
			continue
		}
		delete(s.wheel, sec)
		for _, it := range items {
			if it.name != "" {
				s.expireUse(it, now)
				continue
			}
			e := s.addrs[it.addr]
			if e == nil || e.expires > now {
				continue // forgotten already, or extended (filed again)
			}
			if l != nil {
				if err := l.Forget(it.addr); err != nil {
					errs = append(errs, err)
					retry = append(retry, it)
					continue
				}
			}
			delete(s.addrs, it.addr)
			removed++
		}
	}
	s.oldest = last + 1
	for _, it := range retry {
		s.file(now+time.Second, it) // the next pass tries again
	}
	return removed, errors.Join(errs...)
}

// expireUse removes name's use of an address if it has expired; s.mu is
// held.
func (s *learnedSet) expireUse(it wheelItem, now time.Duration) {
	uses := s.perName[it.name]
	j := find(uses, it.addr)
	if j < 0 || uses[j].expires > now {
		return
	}
	uses = slices.Delete(uses, j, j+1)
	if len(uses) == 0 {
		delete(s.perName, it.name)
	} else {
		s.perName[it.name] = uses
	}
	if e := s.addrs[it.addr]; e != nil {
		e.names = slices.DeleteFunc(e.names, func(n string) bool { return n == it.name })
	}
}

// size is the number of addresses in the mirror.
func (s *learnedSet) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.addrs)
}
