// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"errors"
	"slices"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/loader"
)

// UnixJudging reports whether the sessions' unix sockets are judged on
// this machine, and if not, why.
func (e *Enforcer) UnixJudging() error { return e.dp.UnixJudging() }

// applyLocal writes the local part of a policy (unix sockets, loopback)
// into the datapath for the session, replacing what applyLocal wrote
// before. It runs before the command starts and on every policy change.
// The caller holds s.mu or owns s exclusively.
func (s *Session) applyLocal(l allowlist.Local) error {
	dp, id := s.e.dp, s.cg.ID()
	var errs []error
	if dp.UnixJudging() == nil {
		var exact, globs []string
		for _, u := range l.UnixSockets {
			if allowlist.UnixGlob(u) {
				globs = append(globs, u)
			} else {
				exact = append(exact, u)
			}
		}
		exact = append(exact, s.unixExtra...)
		if err := dp.AllowUnix(id, exact); err != nil {
			return err
		}
		var quiet []string
		for _, q := range QuietUnixSockets {
			if !slices.Contains(exact, q) {
				quiet = append(quiet, q)
			}
		}
		if err := dp.QuietUnix(id, quiet); err != nil {
			return err
		}
		all := append(slices.Clone(exact), quiet...)
		var stale []string
		for _, n := range s.unixNames {
			if !slices.Contains(all, n) {
				stale = append(stale, n)
			}
		}
		if err := dp.RevokeUnix(id, stale); err != nil {
			errs = append(errs, err)
		}
		s.unixNames = all
		var prefixes []string
		if s.ownDir != "" {
			prefixes = []string{s.ownDir + "/"}
		}
		if err := dp.SetUnixMatches(id, globs, prefixes); err != nil {
			return err
		}
	}
	if l.Loopback.Strict() {
		if err := dp.MarkLoopbackStrict(); err != nil {
			return err
		}
		if err := dp.SetLoopbackPorts(id, l.LoopbackPorts); err != nil {
			return err
		}
		s.loopbackStrict = true
	}
	cfg := s.cfg
	if l.Loopback.Strict() {
		cfg.Flags |= loader.FlagLoopbackSession
	} else {
		cfg.Flags &^= loader.FlagLoopbackSession
	}
	if cfg != s.cfg && s.registered {
		if err := dp.SetSession(id, cfg); err != nil {
			return err
		}
	}
	s.cfg = cfg
	return errors.Join(errs...)
}

// dropUnixExtra takes names back from the ones allowUnixExtra allowed.
func (s *Session) dropUnixExtra(names []string) error {
	if len(names) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unixExtra = slices.DeleteFunc(s.unixExtra, func(n string) bool { return slices.Contains(names, n) })
	return s.applyLocal(s.policy.Local())
}

// allowUnixExtra lets the session reach more unix sockets than its policy
// names: the built-in list for the command's user and environment, and the
// daemon's API socket. Start calls it before the command runs.
func (s *Session) allowUnixExtra(names []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		if !slices.Contains(s.unixExtra, n) {
			s.unixExtra = append(s.unixExtra, n)
		}
	}
	return s.applyLocal(s.policy.Local())
}
