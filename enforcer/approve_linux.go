// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
)

// Ask mode's approved names (approvals.go) in the session's name checks:
// the kernel's (loader.SetNames, through setNames), the verifier's and
// the proxy's (NamePolicy). The resolver's own list of names it may
// resolve (dnsresolver.Resolver.AllowName) is the caller's.

// errSessionClosing is an approval for a session whose end began.
var errSessionClosing = errors.New("the session is closing")

// approvalRetry is how soon a failed write of the names at an expiry is
// tried again: until it succeeds the kernel keeps the expired name.
const approvalRetry = time.Second

// ApproveName lets the session's connections to its learned addresses
// name name (the TLS SNI or HTTP Host) for ttl from now, or for the rest
// of the session when ttl <= 0: a person's answer to an ask-mode prompt.
// It returns once the kernel's name check has the name. Approving a name
// again extends its approval, never shortens it.
func (s *Session) ApproveName(name string, ttl time.Duration) error {
	n, err := allowlist.NormalizeName(name)
	if err != nil {
		return fmt.Errorf("approve %q: %w", name, err)
	}
	if _, err := netip.ParseAddr(n); err == nil {
		return fmt.Errorf("approve %q: an address is not a name", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.namesDone {
		return errSessionClosing
	}
	var until time.Time
	if ttl > 0 {
		until = time.Now().Add(ttl)
	}
	s.approved.add(n, until)
	return s.applyApprovals(s.policy)
}

// NamePolicy is what the session's name checks judge by: its policy and
// the names approved for it that have not expired.
func (s *Session) NamePolicy() *allowlist.Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.namePolicy != nil {
		return s.namePolicy
	}
	return s.policy
}

// applyApprovals makes p and the live approvals what the name checks
// judge by, and sets the timer for the next expiry; s.mu is held. The
// kernel gets the names first: a connection judged meanwhile in user
// space finds the old set, never one the kernel lacks.
func (s *Session) applyApprovals(p *allowlist.Policy) error {
	s.approved.prune(time.Now())
	np, err := withApprovals(p, s.approved.names())
	if err != nil {
		return err
	}
	if s.verifier != nil {
		if err := s.setNames(np); err != nil {
			s.armApprovals(time.Now().Add(approvalRetry))
			return err
		}
	}
	s.namePolicy = np
	if next, ok := s.approved.next(); ok {
		s.armApprovals(next)
	} else if s.approvalTimer != nil {
		s.approvalTimer.Stop()
	}
	return nil
}

// armApprovals sets the expiry timer to fire at t; s.mu is held.
func (s *Session) armApprovals(t time.Time) {
	d := max(time.Until(t), 0)
	if s.approvalTimer == nil {
		s.approvalTimer = time.AfterFunc(d, s.expireApprovals)
		return
	}
	s.approvalTimer.Reset(d)
}

// expireApprovals removes the approvals whose time is up.
func (s *Session) expireApprovals() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.namesDone {
		return
	}
	// An error has re-armed the timer (approvalRetry): nobody to tell.
	_ = s.applyApprovals(s.policy)
}

// endApprovals stops the expiry timer at the session's end: the session's
// names go with its datapath entries (RemoveSession), and none may be
// written after.
func (s *Session) endApprovals() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.namesDone = true
	if s.approvalTimer != nil {
		s.approvalTimer.Stop()
	}
}
