package enforcer

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/loader"
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

	preferPort4, preferPort6 uint16 // Adopt: the ports the datapath already redirects to
}

// sessionLearner teaches one session's learned-IP map.
type sessionLearner struct {
	dp *loader.Datapath
	id uint64
}

func (l sessionLearner) Learn(a netip.Addr, expires time.Duration) error {
	err := l.dp.Learn(l.id, a, expires)
	if errors.Is(err, loader.ErrMapFull) {
		return fmt.Errorf("%w: %w", dnsresolver.ErrMapFull, err)
	}
	return err
}

func (l sessionLearner) Forget(a netip.Addr) error { return l.dp.Forget(l.id, a) }

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
		Learner:         sessionLearner{dp: s.e.dp, id: s.cg.ID()},
		Clock:           loader.BootTime,
		Audit:           opts.Audit,
		MinTTL:          d.MinTTL,
		MaxTTL:          d.MaxTTL,
		Grace:           d.Grace,
		MaxIPsPerName:   d.MaxIPsPerName,
		OnEvent:         d.OnEvent,
		ObserveUpstream: d.ObserveUpstream,
		OnQuery:         d.OnQuery,
	})
	if err != nil {
		return fmt.Errorf("DNS resolver: %w", err)
	}
	if err := inNetNS(s.netns, func() error { return r.ListenLoopbackOn(d.preferPort4, d.preferPort6) }); err != nil {
		return fmt.Errorf("DNS resolver: %w", err)
	}
	s.resolver = r
	p4, p6 := r.Ports()
	s.cfg.DNSPort4, s.cfg.DNSPort6 = p4, p6
	return s.e.dp.SetSession(s.cg.ID(), s.cfg)
}
