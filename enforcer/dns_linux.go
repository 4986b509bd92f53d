// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/netns"
)

// DNSOptions configure a session's resolver.
type DNSOptions struct {
	Upstreams     []string // ADDR[:PORT]; empty: the host's resolv.conf
	MinTTL        time.Duration
	MaxTTL        time.Duration
	Grace         time.Duration
	MaxIPsPerName int
	OnEvent       func(dnsresolver.Event)
	// ObserveUpstream receives each upstream round trip's duration.
	ObserveUpstream func(time.Duration)
	// OnQuery receives each query's verdict (for the metrics).
	OnQuery func(verdict string)
	// Path is where UDP DNS goes: DNSPathResolver (the zero value's
	// meaning), DNSPathKernel or DNSPathAuto. A session that cannot take
	// the kernel path (no usable upstream) stays on the resolver's, with
	// no failover: KernelDNS says which, KernelDNSError why.
	Path DNSPath
	// Ask, if set, is the resolver's ask-mode hook (dnsresolver.Config.Ask);
	// AskHold bounds a held answer. The session then takes the resolver
	// path whatever Path says: the kernel path cannot hold an answer.
	Ask     func(context.Context, dnsresolver.AskQuery) bool
	AskHold time.Duration

	preferPort4, preferPort6 uint16 // Adopt: the ports the datapath already redirects to
}

// sessionLearner teaches one session's learned-IP map, and the verify
// mode of addresses learned for entries that set "verify".
type sessionLearner struct {
	dp     *loader.Datapath
	id     uint64
	ports  *portTable
	policy func() *allowlist.Policy
}

// Teach gives a the port rule of name before it is learned
// (dnsresolver.PortLearner).
func (l sessionLearner) Teach(a netip.Addr, name string) error {
	if l.ports == nil {
		return nil
	}
	err := l.ports.teach(a, name)
	if errors.Is(err, loader.ErrMapFull) {
		return fmt.Errorf("%w: %w", dnsresolver.ErrMapFull, err)
	}
	return err
}

// LearnName records the verify mode of the entry that allowed name for a.
func (l sessionLearner) LearnName(a netip.Addr, name string) error {
	if m := verifyMode(l.policy(), name); m != 0 {
		return l.dp.SetVerifyMode(l.id, a, m)
	}
	return nil
}

func (l sessionLearner) Learn(a netip.Addr, expires time.Duration) error {
	err := l.dp.Learn(l.id, a, expires)
	if errors.Is(err, loader.ErrMapFull) {
		return fmt.Errorf("%w: %w", dnsresolver.ErrMapFull, err)
	}
	return err
}

// Forget removes a only once its entry has expired: the kernel DNS path
// may have extended it since the resolver learned it.
func (l sessionLearner) Forget(a netip.Addr) error {
	if err := l.dp.ForgetExpired(l.id, a, loader.BootTime()); err != nil {
		return err
	}
	return l.dp.ForgetVerifyMode(l.id, a)
}

// startResolver starts the session's resolver on loopback and points the
// session's DNS redirection at it.
func (s *Session) startResolver(opts Options) error {
	d := opts.DNS
	ups := d.Upstreams
	if len(ups) == 0 {
		// Without a nameserver the session still gets its resolver (so no
		// query escapes): allowed names then fail with a SERVFAIL whose
		// event says to pass --dns-upstream.
		ups, _ = dnsresolver.SystemUpstreams("/etc/resolv.conf")
	}
	r, err := dnsresolver.New(dnsresolver.Config{
		Policy:          opts.Policy,
		Upstreams:       ups,
		Learner:         sessionLearner{dp: s.e.dp, id: s.cg.ID(), ports: s.ports, policy: s.Policy},
		Clock:           loader.BootTime,
		Audit:           opts.Audit,
		MinTTL:          d.MinTTL,
		MaxTTL:          d.MaxTTL,
		Grace:           d.Grace,
		MaxIPsPerName:   d.MaxIPsPerName,
		OnEvent:         d.OnEvent,
		ObserveUpstream: d.ObserveUpstream,
		OnQuery:         d.OnQuery,
		Ask:             d.Ask,
		AskHold:         d.AskHold,
	})
	if err != nil {
		return fmt.Errorf("DNS resolver: %w", err)
	}
	if err := netns.Do(s.netns, func() error { return r.ListenLoopbackOn(d.preferPort4, d.preferPort6) }); err != nil {
		return fmt.Errorf("DNS resolver: %w", err)
	}
	s.resolver = r
	p4, p6 := r.Ports()
	s.cfg.DNSPort4, s.cfg.DNSPort6 = p4, p6
	if err := s.e.dp.SetSession(s.cg.ID(), s.cfg); err != nil {
		return err
	}
	if d.Ask == nil && (d.Path == DNSPathKernel || d.Path == DNSPathAuto) {
		if err := s.startKDNS(opts, ups); err != nil {
			s.kdnsErr = err
		} else {
			s.kdnsStop = make(chan struct{})
			go s.sweepKernelLearned(s.kdnsStop)
			if s.DNSFailover() {
				s.beatDone = make(chan struct{})
				go s.beat(s.kdnsStop, s.beatDone)
			}
		}
	} else {
		// An adopted session may have been on the kernel path.
		_ = s.e.dp.ClearKDNS(s.cg.ID())
	}
	return nil
}

// KernelDNSError says why a session that asked for the kernel DNS path is
// not on it (nil when it is, or never asked).
func (s *Session) KernelDNSError() error { return s.kdnsErr }

// sweepKernelLearned is the garbage collector of what the kernel DNS path
// learned: entries a few seconds past their expiry (the kernel already
// refuses them; until then a denial can still say "TTL expired").
func (s *Session) sweepKernelLearned(stop <-chan struct{}) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			_, _ = s.e.dp.SweepLearned(s.cg.ID(), loader.BootTime()-5*time.Second)
		}
	}
}
