// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/proxy"
	"github.com/sluice-dev/sluice/report"
)

// userspaceResolver gives the allowlist proxy of a userspace session
// (landlock, proxy, seatbelt) its resolver. With --dns-upstream, allowed
// names go to those servers and nowhere else, through a sluice resolver in
// this process: the same policy check, rebinding filter and cache as a BPF
// session's resolver, without a listener or a datapath to teach. Without
// it, the proxy keeps the system's resolver (nil), which honours
// /etc/hosts and, on macOS, the system's per-domain DNS settings; there is
// no session resolver in these modes for it to disagree with. The caller
// closes the resolver.
func userspaceResolver(o runOptions, policy *allowlist.Policy, rep *report.Reporter, alog *report.AuditLog) (*dnsresolver.Resolver, error) {
	if len(o.dnsUpstreams) == 0 {
		return nil, nil
	}
	r, err := dnsresolver.New(dnsresolver.Config{
		Policy:        policy,
		Upstreams:     o.dnsUpstreams,
		MinTTL:        o.dnsTTLMin,
		MaxTTL:        o.dnsTTLMax,
		Grace:         o.dnsGrace,
		MaxIPsPerName: o.dnsMaxIPs,
		OnEvent:       report.DNSEvents(rep, alog, nil), // the proxy asked, no program
	})
	if err != nil {
		return nil, fmt.Errorf("--dns-upstream: %w", err)
	}
	return r, nil
}

// withResolver points cfg at r when there is one.
func withResolver(cfg proxy.Config, r *dnsresolver.Resolver) proxy.Config {
	if r != nil {
		cfg.Resolve = r.LookupNetIP
	}
	return cfg
}
