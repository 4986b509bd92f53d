// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"context"
	"net/netip"
	"strings"
	"time"
)

// DefaultAskHold bounds how long the resolver holds the answer to a name
// it is asking a person about (Config.Ask). glibc waits 5 s per attempt
// by default (resolv.conf `options timeout:` raises it, up to 30 s), and
// a retransmitted query joins the same prompt; past the bound the
// resolver answers REFUSED while the prompt stays open, so an approval
// given later makes the client's retry succeed.
const DefaultAskHold = 25 * time.Second

// AskQuery is a question about a name the session's policy does not allow.
type AskQuery struct {
	Name   string // normalised
	QType  string
	Client netip.AddrPort // who asked (a loopback socket of the session)
}

// askExtras is the per-session set of names a person allowed for the rest
// of the session (AllowName): the filter consults it after the policy.
type askExtras struct {
	names map[string]struct{}
}

// AllowName adds name (normalised) to the names the session may resolve,
// beside its policy, for the rest of the session: ask mode's "session"
// and "always" approvals.
func (r *Resolver) AllowName(name string) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.extras.Load()
	next := &askExtras{names: map[string]struct{}{name: {}}}
	if cur != nil {
		for n := range cur.names {
			next.names[n] = struct{}{}
		}
	}
	r.extras.Store(next)
}

// extraAllowed says whether a person allowed name for the session.
func (r *Resolver) extraAllowed(name string) bool {
	x := r.extras.Load()
	if x == nil {
		return false
	}
	_, ok := x.names[name]
	return ok
}

// AllowAddr lets the session reach a for ttl (from now) in the datapath:
// ask mode's approval of an address a connect was refused for.
func (r *Resolver) AllowAddr(a netip.Addr, ttl time.Duration) error {
	now := r.cfg.Clock()
	return r.learned.learn(r.cfg.Learner, a.String(), now, []netip.Addr{a.Unmap()}, []time.Duration{now + ttl}, 0, 0)
}

// ask asks the person about name, holding the answer for at most
// Config.AskHold.
func (r *Resolver) ask(ctx context.Context, q AskQuery) bool {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.AskHold)
	defer cancel()
	return r.cfg.Ask(ctx, q)
}
