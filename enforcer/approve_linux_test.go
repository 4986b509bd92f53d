// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
)

// TestApproveNameExpires: without a verifier (no datapath needed) a
// session's NamePolicy takes an approved name, a once approval leaves it
// at its expiry, a session approval stays through a new policy, and
// nothing is approved once the session's end began.
func TestApproveNameExpires(t *testing.T) {
	p, err := allowlist.FromStrings([]string{"allowed.test"})
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{policy: p}
	defer s.endApprovals()
	if err := s.ApproveName("Once.Allowed.Test.", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := s.ApproveName("sess.allowed.test", 0); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"allowed.test", "once.allowed.test", "sess.allowed.test"} {
		if _, ok := s.NamePolicy().MatchName(n); !ok {
			t.Fatalf("%s not in the name policy", n)
		}
	}
	if _, ok := s.Policy().MatchName("once.allowed.test"); ok {
		t.Fatal("the approval went into the session's policy")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := s.NamePolicy().MatchName("once.allowed.test"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the once approval did not expire")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A policy change (a reload) keeps the session approval.
	np, err := allowlist.FromStrings([]string{"other.test"})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	err = s.applyApprovals(np)
	s.policy = np
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.NamePolicy().MatchName("sess.allowed.test"); !ok {
		t.Fatal("a policy change dropped the session approval")
	}
	if _, ok := s.NamePolicy().MatchName("allowed.test"); ok {
		t.Fatal("the old policy's name outlived the change")
	}
	if err := s.ApproveName("1.2.3.4", 0); err == nil {
		t.Fatal("an address was approved as a name")
	}
	s.endApprovals()
	if err := s.ApproveName("late.test", 0); err == nil {
		t.Fatal("an approval after the session's end began")
	}
}
