// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// ErrNoUpstream is a resolver without an upstream to forward to. The
// front door that knows how the user names one says so.
var ErrNoUpstream = errors.New("no upstream DNS server configured")

// SystemUpstreams reads the nameserver lines of a resolv.conf file (parsed
// by miekg/dns, as the resolver's wire format is). Lines that are not IP
// addresses are skipped and zone indices dropped; a file without
// nameservers is an error that wraps ErrNoUpstream.
func SystemUpstreams(path string) ([]string, error) {
	c, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("read DNS upstreams: %w: %w", err, ErrNoUpstream)
	}
	ups := upstreamsOf(c)
	if len(ups) == 0 {
		return nil, fmt.Errorf("no nameserver in %s: %w", path, ErrNoUpstream)
	}
	return ups, nil
}

// upstreamsOf turns a resolv.conf's servers into host:port upstreams.
func upstreamsOf(c *dns.ClientConfig) []string {
	port, err := strconv.ParseUint(c.Port, 10, 16)
	if err != nil || port == 0 {
		port = 53
	}
	var ups []string
	for _, s := range c.Servers {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		ups = append(ups, netip.AddrPortFrom(a.WithZone(""), uint16(port)).String())
	}
	return ups
}

// SearchDomains reads the search list of a resolv.conf file (the last
// "search" or "domain" line wins, as in glibc), normalised to lower case
// without the trailing dot. A missing or unreadable file has none.
func SearchDomains(path string) []string {
	c, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil
	}
	return searchOf(c)
}

// searchOf normalises a resolv.conf's search list.
func searchOf(c *dns.ClientConfig) []string {
	search := []string{}
	for _, d := range c.Search {
		if d = strings.ToLower(strings.TrimSuffix(d, ".")); d != "" {
			search = append(search, d)
		}
	}
	return search
}
