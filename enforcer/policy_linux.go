// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/loader"
)

// Policy is the session's policy in force.
func (s *Session) Policy() *allowlist.Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policy
}

// SetPolicy replaces the session's policy for new connections and queries:
// prefixes are added before stale ones are removed, so an entry present in
// both never blinks; open connections are not cut.
func (s *Session) SetPolicy(p *allowlist.Policy) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := map[netip.Prefix]bool{}
	for _, pr := range s.policy.Prefixes() {
		old[pr] = true
	}
	var add, del []netip.Prefix
	now := map[netip.Prefix]bool{}
	for _, pr := range p.Prefixes() {
		now[pr] = true
		if !old[pr] {
			add = append(add, pr)
		}
	}
	for pr := range old {
		if !now[pr] {
			del = append(del, pr)
		}
	}
	if s.ports == nil {
		s.ports = newPortTable(s.e.dp, s.cg.ID())
	}
	// The rules first: a prefix is never open on more ports than its rule.
	on, err := s.ports.setPolicy(p)
	if err != nil {
		return err
	}
	if on && s.cfg.Flags&loader.FlagPortRules == 0 {
		s.cfg.Flags |= loader.FlagPortRules
		if err := s.e.dp.SetSession(s.cg.ID(), s.cfg); err != nil {
			return err
		}
	}
	if err := s.e.dp.AddCIDRs(s.cg.ID(), add); err != nil {
		return err
	}
	if err := s.e.dp.DeleteCIDRs(s.cg.ID(), del); err != nil {
		return err
	}
	if err := s.e.dp.DeleteCIDRPorts(s.cg.ID(), del); err != nil {
		return err
	}
	if err := s.applyLocal(p.Local()); err != nil {
		return err
	}
	// The names the name checks judge by: the new policy's, and the
	// approvals a person gave the session, which outlive it.
	if err := s.applyApprovals(p); err != nil {
		return err
	}
	if s.resolver != nil {
		s.resolver.SetPolicy(p)
	}
	if s.kdnsCfg != nil && hasVerify(p) {
		_ = s.e.dp.ClearKDNS(s.cg.ID())
		s.kdnsCfg, s.kdnsErr = nil, errVerifyKDNS
	}
	if s.kdnsCfg != nil {
		if err := s.e.dp.SetKDNS(s.cg.ID(), *s.kdnsCfg, kdnsNames(p)); err != nil {
			// A name the kernel cannot hold: everything to the resolver,
			// which has the new policy already.
			_ = s.e.dp.ClearKDNS(s.cg.ID())
			s.kdnsCfg, s.kdnsErr = nil, err
		}
	}
	s.policy = p
	return nil
}

// Resolver is the session's resolver, or nil.
func (s *Session) Resolver() *dnsresolver.Resolver { return s.resolver }

// LearnedFrom names the host names addr was learned from for the session:
// the resolver's, and the one the kernel DNS path last learned it from
// (which the resolver never saw: answers the kernel judged itself, while
// the session's DNS failed over, or on the kernel path), so that a
// refusal on the address says which name it was allowed for on every
// path.
func (s *Session) LearnedFrom(addr netip.Addr) []string {
	var names []string
	if s.resolver != nil {
		names = s.resolver.LearnedFrom(addr)
	}
	if n := s.e.dp.KDNSLearnedFrom(s.cg.ID(), addr); n != "" && !slices.Contains(names, n) {
		names = append(names, n)
	}
	return names
}

// Populated reports whether processes are left in the session.
func (s *Session) Populated() (bool, error) { return s.cg.Populated() }

// Procs lists the session's processes.
func (s *Session) Procs() ([]int, error) { return s.cg.Procs() }

// DNSPorts are the loopback ports of the session's resolver (0 without one).
func (s *Session) DNSPorts() (v4, v6 uint16) { return s.cfg.DNSPort4, s.cfg.DNSPort6 }

// Adopt takes over a session whose owner died (a daemon restarting after a
// crash): its cgroup, datapath entries and event ring buffer stay as they
// were, and a new resolver starts, on the old ports when they are free.
// With opts.Proxy a new proxy starts on opts.Proxy.Port, the port the
// command's environment names, and that port is registered as the
// session's listener again. The command cannot be told another port, so
// when that one is taken (or unknown) the session is adopted without a
// proxy and ProxyError says why: it stays confined, and failing the
// adoption would leave it without an owner.
func (e *Enforcer) Adopt(name string, opts Options, dnsPort4, dnsPort6 uint16) (*Session, error) {
	lockPath := filepath.Join(e.cfg.sessionDir(), name+".lock")
	lock, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open session lock: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("session %s is owned by a running process: %w", name, err)
	}
	s := &Session{e: e, lock: lock, policy: opts.Policy, adopted: true}
	var cg *cgroups.Session
	if cg, err = e.root.Session(name); err != nil {
		s.lock.Close()
		return nil, err
	}
	s.cg = cg
	s.registered = true
	s.unixExtra = slices.Clone(opts.UnixSockets)
	// The session's own directory, if it was given one, keeps its prefix
	// entry through policy changes (found where the session's owner made
	// its mount point; a daemon that made it in another mount namespace
	// leaves the prefix out on the next change, which refuses, never
	// opens).
	if own := OwnDir(cg.ID()); dirExists(own) {
		s.ownDir = own
	}
	if opts.Audit {
		s.cfg.Flags |= 1
	}
	// The Landlock scope of the session's processes cannot be taken back:
	// keep leaving abstract names to it.
	if f, err := e.dp.SessionFlagsOf(cg.ID()); err == nil {
		s.cfg.Flags |= f & (loader.FlagOwnAbstract | loader.FlagPortRules)
	}
	s.ports = newPortTable(e.dp, cg.ID())
	if on, err := s.ports.setPolicy(opts.Policy); err != nil {
		s.lock.Close()
		return nil, err
	} else if on {
		s.cfg.Flags |= loader.FlagPortRules
	}
	// The loopback mode is the policy's, and startResolver rewrites the
	// session's whole entry (with the resolver's ports): without the flag
	// here, a restart would reopen loopback to a "loopback": "session"
	// session.
	if opts.Policy != nil && opts.Policy.Local().Loopback.Strict() {
		s.cfg.Flags |= loader.FlagLoopbackSession
		s.loopbackStrict = true
	}
	// With SharedEvents the daemon reads the global ring buffer; adopted
	// sessions are scanned on removal, so a private ring buffer left by an
	// older daemon goes too.
	if !opts.SharedEvents {
		if s.events, err = e.dp.SessionEvents(cg.ID()); err != nil {
			// The ring buffer is gone (the entry was reclaimed): start over.
			if s.events, err = e.dp.AddSession(cg.ID(), s.cfg); err != nil {
				s.lock.Close()
				return nil, err
			}
		}
	}
	// An upgrade replaced pinned maps that held this session's entries
	// (loader.Datapath.Replaced): write its policy's again. The session
	// entry and its listeners are written below in any case.
	if len(e.dp.Replaced()) > 0 && opts.Policy != nil {
		if err := e.dp.AddCIDRs(cg.ID(), opts.Policy.Prefixes()); err != nil {
			s.lock.Close()
			return nil, err
		}
		if err := s.applyLocal(opts.Policy.Local()); err != nil {
			s.lock.Close()
			return nil, err
		}
	}
	if opts.DNS != nil {
		opts.DNS.preferPort4, opts.DNS.preferPort6 = dnsPort4, dnsPort6
		if err := s.startResolver(opts); err != nil {
			s.lock.Close()
			return nil, err
		}
		if err := s.registerListeners(); err != nil {
			s.lock.Close()
			return nil, err
		}
		if err := s.startVerifier(opts); err != nil {
			s.lock.Close()
			return nil, err
		}
		// What the session learned before: the new resolver forgets it
		// at expiry. Unreadable, the session is adopted anyway (its
		// enforcement matters more than freeing map space early), and
		// RemoveSession still clears those entries at its end.
		if learned, err := e.dp.LearnedOf(cg.ID()); err == nil {
			s.resolver.Adopt(learned)
		}
	}
	if opts.Proxy != nil {
		if opts.Proxy.Port == 0 {
			s.proxyErr = errors.New("its port is not on record")
		} else if err := s.startProxy(opts); err != nil {
			s.proxyErr = fmt.Errorf("port %d: %w", opts.Proxy.Port, err)
			if s.proxy != nil {
				_ = s.proxy.Close()
				s.proxy = nil
			}
			s.proxyAddr = netip.AddrPort{}
		}
	}
	return s, nil
}

// WaitEmpty blocks until the session has no processes left or stop is
// closed; it is how an adopted session, whose command is not our child,
// ends.
func (s *Session) WaitEmpty(stop <-chan struct{}) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		if s.replaced() {
			return nil // its cgroup is gone, whoever has the path now
		}
		pop, err := s.cg.Populated()
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if !pop {
			return nil
		}
		select {
		case <-stop:
			return errors.New("stopped")
		case <-t.C:
		}
	}
}

// dirExists reports whether path is a directory.
func dirExists(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}
