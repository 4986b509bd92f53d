// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/namecheck"
	"github.com/sluice-dev/sluice/netns"
)

// VerifyOptions configure a session's name verifier (package namecheck):
// every session with a resolver has one, since the addresses it learns
// are the ones a CDN shares with other names.
type VerifyOptions struct {
	// OnRefuse receives the verifier's refusals.
	OnRefuse func(namecheck.Refusal)
}

// startVerifier serves the session's verifier on loopback of the
// session's network namespace (where the datapath's redirect lands, as
// the DNS redirect's does) and points the datapath at it. As with the
// proxy, the verifier dials the original address from the enforcer's
// own namespace.
func (s *Session) startVerifier(opts Options) error {
	var onRefuse func(namecheck.Refusal)
	if opts.Verify != nil {
		onRefuse = opts.Verify.OnRefuse
	}
	id := s.cg.ID()
	cfg := namecheck.Config{
		Policy: s.Policy,
		Origin: func(peer netip.AddrPort) (namecheck.Origin, bool) {
			o, ok := s.e.dp.TakeOrigin(id, peer)
			return namecheck.Origin{Dst: o.Dst, PID: o.PID, Comm: o.Comm}, ok
		},
		OnRefuse: onRefuse,
		Audit:    opts.Audit,
	}
	if s.resolver != nil {
		cfg.LearnedFrom = s.resolver.LearnedFrom
	}
	v := namecheck.New(cfg)
	var l4, l6 net.Listener
	err := netns.Do(s.netns, func() (err error) {
		if l4, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
			return fmt.Errorf("name verifier: %w", err)
		}
		// Without IPv6 loopback the datapath sends IPv6 connections to
		// ::ffff:127.0.0.1, as it does DNS.
		l6, _ = net.Listen("tcp6", "[::1]:0")
		return nil
	})
	if err != nil {
		return err
	}
	s.verifier = v
	for _, l := range []net.Listener{l4, l6} {
		if l == nil {
			continue
		}
		port := uint16(l.Addr().(*net.TCPAddr).Port)
		s.verifyPorts = append(s.verifyPorts, port)
		if err := s.e.dp.SetListener(port, id); err != nil {
			l.Close()
			return err
		}
		go func() { _ = v.Serve(l) }()
	}
	p6 := uint16(0)
	if len(s.verifyPorts) > 1 {
		p6 = s.verifyPorts[1]
	}
	return s.e.dp.SetVerifier(id, s.verifyPorts[0], p6)
}

// VerifierStats are the session verifier's counters; ok is false without
// one.
func (s *Session) VerifierStats() (st *namecheck.Stats, ok bool) {
	if s.verifier == nil {
		return nil, false
	}
	return s.verifier.Stats(), true
}

// verifyMode is the datapath's mode for an address learned for name.
func verifyMode(p *allowlist.Policy, name string) loader.VerifyMode {
	e, ok := p.MatchName(name)
	if !ok {
		return 0
	}
	switch e.Verify {
	case allowlist.VerifyName:
		return loader.VerifyName
	case allowlist.VerifyAddress:
		return loader.VerifyAddress
	}
	return 0
}

// hasVerify reports whether an entry of p sets "verify".
func hasVerify(p *allowlist.Policy) bool {
	for _, e := range p.Names() {
		if e.Verify != allowlist.VerifyDefault {
			return true
		}
	}
	return false
}

// errVerifyKDNS keeps a session with "verify" entries on the resolver
// path: the kernel DNS path learns addresses without their entry's mode.
var errVerifyKDNS = errors.New(`an entry sets "verify": the session's DNS stays on the resolver path, which learns each address with its entry's rule`)
