// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
)

// approvals are the names a person approved for the session in ask mode,
// each until its expiry (the zero time: for the rest of the session).
// They are kept beside the policy, never in it: a policy change (a
// reload, the session's request narrowed to a new machine allowlist
// again) replaces the policy, and a person's answer for this session
// must outlive it without widening what the narrowing decided for every
// other name.
type approvals struct {
	until map[string]time.Time
}

// add approves name until the given time (zero: for the rest of the
// session). A later expiry, or none, wins over an earlier one: a second
// answer for the same name never shortens the first.
func (a *approvals) add(name string, until time.Time) {
	if a.until == nil {
		a.until = map[string]time.Time{}
	}
	cur, ok := a.until[name]
	switch {
	case !ok:
		a.until[name] = until
	case cur.IsZero():
	case until.IsZero() || until.After(cur):
		a.until[name] = until
	}
}

// prune forgets the approvals expired at now.
func (a *approvals) prune(now time.Time) {
	for n, u := range a.until {
		if !u.IsZero() && !now.Before(u) {
			delete(a.until, n)
		}
	}
}

// next is the earliest expiry; ok is false when none expires.
func (a *approvals) next() (t time.Time, ok bool) {
	for _, u := range a.until {
		if !u.IsZero() && (!ok || u.Before(t)) {
			t, ok = u, true
		}
	}
	return t, ok
}

// names are the approved names, sorted.
func (a *approvals) names() []string {
	out := make([]string, 0, len(a.until))
	for n := range a.until {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// withApprovals is p with each of names added as a host entry: the
// policy the session's name checks judge by (the kernel's names, the
// verifier, the proxy's tunnels). A name p matches already keeps p's
// entry alone, with its ports and "verify": the approval asked for
// nothing p did not give. Without names it is p itself.
func withApprovals(p *allowlist.Policy, names []string) (*allowlist.Policy, error) {
	var add []string
	for _, n := range names {
		if _, ok := p.MatchName(n); !ok {
			add = append(add, n)
		}
	}
	if len(add) == 0 {
		return p, nil
	}
	ap, err := allowlist.FromStrings(add)
	if err != nil {
		return nil, fmt.Errorf("approved names: %w", err)
	}
	return p.Merge(ap), nil
}

// sniNames are the host names and the wildcards' domains of p.
func sniNames(p *allowlist.Policy) (exact, wild []string) {
	for _, e := range p.Names() {
		switch e.Kind {
		case allowlist.KindHost:
			exact = append(exact, e.Name)
		case allowlist.KindWildcard:
			wild = append(wild, e.Name)
		}
	}
	return exact, wild
}
