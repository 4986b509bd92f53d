// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/sluice-dev/sluice/netns"
	"github.com/sluice-dev/sluice/proxy"
)

// ProxyOptions start a session's allowlist proxy: programs that honour
// HTTP_PROXY get host-name precision on top of the kernel's IP rules.
type ProxyOptions struct {
	OnEvent func(proxy.Event)
	// Port is the loopback port to serve on; 0 lets the kernel choose.
	// Adopt needs the port the session's command was told: its
	// HTTPS_PROXY cannot be changed once it runs.
	Port uint16
}

// startProxy serves the session's proxy on a kernel-chosen loopback port
// and registers its port, and the resolver's, as this session's own: the
// datapath refuses other sessions' connects to them.
//
// The proxy resolves names with the session's resolver, in process: the
// session's upstreams (--dns-upstream, or the daemon's settings), its
// rebinding filter, learned set and cache. The host's resolv.conf may name
// a server the session's network cannot reach, and a second resolver
// could answer differently from the one the session's programs use.
func (s *Session) startProxy(opts Options) error {
	cfg := proxy.Config{
		// The names a person approved for the session count for the
		// proxy (its CONNECT targets, the names inside its tunnels) as
		// they do in the kernel's name check; the resolver still asks
		// about a name none of its own sets allows.
		Policy:  s.NamePolicy,
		OnEvent: opts.Proxy.OnEvent,
	}
	if s.resolver != nil {
		cfg.Resolve = s.resolver.LookupNetIP
	}
	p, err := proxy.New(cfg)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	var l net.Listener
	err = netns.Do(s.netns, func() (err error) {
		l, err = proxy.ListenLoopbackOn(context.Background(), opts.Proxy.Port)
		return err
	})
	if err != nil {
		return err
	}
	s.proxy = p
	s.proxyAddr = netip.MustParseAddrPort(l.Addr().String())
	if err := s.e.dp.SetListener(s.proxyAddr.Port(), s.cg.ID()); err != nil {
		l.Close()
		return err
	}
	go func() { _ = p.Serve(l) }()
	return nil
}

// registerListeners marks the session's resolver ports as its own.
func (s *Session) registerListeners() error {
	var errs []error
	for _, port := range []uint16{s.cfg.DNSPort4, s.cfg.DNSPort6} {
		if port != 0 {
			errs = append(errs, s.e.dp.SetListener(port, s.cg.ID()))
		}
	}
	return errors.Join(errs...)
}

// ProxyError says why the session has no proxy although one was asked
// for: Adopt could not serve it again on the port the command's
// environment names (another process took it while nobody served it).
// The session is confined all the same; programs that use the proxy
// variables fail to connect. nil when the proxy runs or none was asked for.
func (s *Session) ProxyError() error { return s.proxyErr }

// ProxyAddr is the session's proxy on loopback (invalid without one).
func (s *Session) ProxyAddr() netip.AddrPort { return s.proxyAddr }

// ProxyStats are the session proxy's counters; ok is false when the
// session has no proxy.
func (s *Session) ProxyStats() (st proxy.Stats, ok bool) {
	if s.proxy == nil {
		return st, false
	}
	return s.proxy.Stats(), true
}

// ProxyEnv is the environment that points a command at the session's proxy
// (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY in both cases, NO_PROXY for
// loopback), or nil without a proxy.
func (s *Session) ProxyEnv() []string {
	if !s.proxyAddr.IsValid() {
		return nil
	}
	return proxy.Env(s.proxyAddr)
}
