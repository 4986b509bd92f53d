// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
)

// TestApprovalsExpire: a once approval goes at its expiry, a session one
// never; a second answer extends an approval, never shortens it.
func TestApprovalsExpire(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var a approvals
	a.add("once.test", t0.Add(time.Minute))
	a.add("sess.test", time.Time{})
	a.add("both.test", t0.Add(time.Minute))
	a.add("both.test", time.Time{})         // session after once: for good
	a.add("sess.test", t0.Add(time.Second)) // once after session: still for good
	a.add("once.test", t0.Add(time.Second)) // an earlier expiry does not shorten
	a.add("late.test", t0.Add(2*time.Minute))
	if got := a.names(); !slices.Equal(got, []string{"both.test", "late.test", "once.test", "sess.test"}) {
		t.Fatalf("names %q", got)
	}
	if next, ok := a.next(); !ok || !next.Equal(t0.Add(time.Minute)) {
		t.Fatalf("next %v %v", next, ok)
	}
	a.prune(t0.Add(time.Minute - time.Nanosecond))
	if len(a.names()) != 4 {
		t.Fatalf("pruned early: %q", a.names())
	}
	a.prune(t0.Add(time.Minute))
	if got := a.names(); !slices.Equal(got, []string{"both.test", "late.test", "sess.test"}) {
		t.Fatalf("after the first expiry: %q", got)
	}
	a.add("late.test", t0.Add(3*time.Minute)) // extended
	a.prune(t0.Add(150 * time.Second))
	if next, ok := a.next(); !ok || !next.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("next after extension %v %v", next, ok)
	}
	a.prune(t0.Add(time.Hour))
	if got := a.names(); !slices.Equal(got, []string{"both.test", "sess.test"}) {
		t.Fatalf("session approvals expired: %q", got)
	}
	if _, ok := a.next(); ok {
		t.Fatal("a session approval has an expiry")
	}
}

// TestWithApprovals: the name checks' policy is the session's policy and
// its approved names; a name the policy covers keeps the policy's entry
// (its ports), the policy's other settings stay, and the policy itself is
// untouched (a reload replaces it; the approvals are applied again).
func TestWithApprovals(t *testing.T) {
	p, err := allowlist.Parse([]byte(`{"allowed_hosts": [{"host": "*.ports.test", "ports": [443]}, "allowed.test"], "loopback": "session"}`))
	if err != nil {
		t.Fatal(err)
	}
	np, err := withApprovals(p, []string{"once.allowed.test", "a.ports.test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"allowed.test", "once.allowed.test", "x.ports.test"} {
		if _, ok := np.MatchName(n); !ok {
			t.Errorf("%s is not allowed with the approvals", n)
		}
	}
	if _, ok := np.MatchName("other.allowed.test"); ok {
		t.Error("an unapproved name is allowed")
	}
	if _, ok := p.MatchName("once.allowed.test"); ok {
		t.Error("the session's own policy took the approval")
	}
	if r, _ := np.NamePorts("a.ports.test"); r.Ports.Allows(allowlist.ProtoTCP, 80) {
		t.Error("an approval widened the ports of a name the policy covers")
	}
	if !np.Local().Loopback.Strict() {
		t.Error("the policy's loopback mode was lost")
	}
	exact, wild := sniNames(np)
	if !slices.Contains(exact, "once.allowed.test") || !slices.Contains(exact, "allowed.test") || !slices.Equal(wild, []string{"ports.test"}) {
		t.Errorf("kernel names %q %q", exact, wild)
	}
	if same, _ := withApprovals(p, nil); same != p {
		t.Error("no approvals: not the policy itself")
	}
	if _, err := withApprovals(p, []string{"bad name"}); err == nil {
		t.Error("an invalid name was approved")
	}
}
