// SPDX-License-Identifier: Apache-2.0

package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-dev/sluice/dnsresolver"
)

// dnsFlags are the resolver's settings that `sluice run` and `sluice
// daemon` both take, declared once so that their names and defaults
// cannot drift apart. Both option structs embed it.
type dnsFlags struct {
	dnsUpstreams []string
	dnsTTLMin    time.Duration
	dnsTTLMax    time.Duration
	dnsGrace     time.Duration
	dnsMaxIPs    int
	dnsPath      string
}

// addDNSFlags declares the DNS flags on f. Only --dns-upstream and
// --dns-path mean something different to each command (a session's
// proxy also resolves through the upstream; the daemon's path has a
// configuration key behind it), so their help is the caller's.
func (d *dnsFlags) addDNSFlags(f *pflag.FlagSet, upstreamHelp, pathHelp string) {
	f.StringArrayVar(&d.dnsUpstreams, "dns-upstream", nil, upstreamHelp)
	f.DurationVar(&d.dnsTTLMin, "dns-ttl-min", dnsresolver.DefaultMinTTL, "learn answers for at least this long")
	f.DurationVar(&d.dnsTTLMax, "dns-ttl-max", dnsresolver.DefaultMaxTTL, "learn answers for at most this long")
	f.DurationVar(&d.dnsGrace, "dns-grace", dnsresolver.DefaultGrace, "keep a learned address reachable this long after its TTL")
	f.IntVar(&d.dnsMaxIPs, "dns-max-ips-per-name", dnsresolver.DefaultMaxIPsPerName, "answer SERVFAIL rather than learn more addresses for one name")
	f.StringVar(&d.dnsPath, "dns-path", "", pathHelp)
}
