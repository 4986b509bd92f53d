// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestAdoptedAddressesExpire: addresses a session learned before its
// resolver existed (a daemon restart) are forgotten at their expiry like
// the resolver's own, and an address the resolver learns again keeps the
// later expiry.
func TestAdoptedAddressesExpire(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	now := e.clock.Now()
	early, late, relearned := netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::7"), netip.MustParseAddr("203.0.113.5")
	e.r.Adopt(map[netip.Addr]time.Duration{
		early: now - time.Second, // expired while no daemon ran
		netip.MustParseAddr("::ffff:203.0.113.8"): now + 3*time.Second,
		late:      now + time.Hour,
		relearned: now + 2*time.Second,
	})
	if n := e.r.LearnedCount(); n != 4 {
		t.Fatalf("adopted 4 addresses, the resolver counts %d", n)
	}
	if len(e.learner.calls()) != 0 {
		t.Fatalf("adopting wrote to the datapath: %v", e.learner.calls())
	}
	// api.example.com answers 203.0.113.5 for 300 s: learned anew, later.
	if m := e.ask(t, "api.example.com.", dns.TypeA); m.Rcode != dns.RcodeSuccess {
		t.Fatalf("answer: %v", m)
	}
	if n, err := e.r.GC(); n != 1 || err != nil || !slices.Equal(e.learner.forgotten(), []netip.Addr{early}) {
		t.Fatalf("first pass: removed %d (%v), forgot %v; want only the expired %s", n, err, e.learner.forgotten(), early)
	}
	e.clock.Advance(5 * time.Second)
	if n, _ := e.r.GC(); n != 1 || !slices.Contains(e.learner.forgotten(), netip.MustParseAddr("203.0.113.8")) {
		t.Fatalf("after 5 s: removed %d, forgot %v; want 203.0.113.8 too", n, e.learner.forgotten())
	}
	if slices.Contains(e.learner.forgotten(), relearned) {
		t.Fatalf("%s was forgotten at its adopted expiry, though learned again since", relearned)
	}
	if n := e.r.LearnedCount(); n != 2 {
		t.Fatalf("left: %d addresses, want %s and %s", n, late, relearned)
	}
	// A policy change forgets adopted addresses (their names are unknown)
	// and keeps those of names still allowed.
	e.r.Prune()
	if got := e.r.LearnedCount(); got != 1 || !slices.Contains(e.learner.forgotten(), late) {
		t.Fatalf("after Prune: %d left, forgot %v", got, e.learner.forgotten())
	}
}
