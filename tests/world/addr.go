// SPDX-License-Identifier: Apache-2.0

package world

import "net/netip"

// Names of the veth ends, each in its own namespace.
const (
	ClientIface = "sl-client"
	WorldIface  = "sl-world"
)

// Link addresses: the veth between the client and the world.
var (
	ClientV4     = netip.MustParseAddr("198.51.100.2")
	WorldV4      = netip.MustParseAddr("198.51.100.1")
	ClientV6     = netip.MustParseAddr("2001:db8:1::2")
	WorldV6      = netip.MustParseAddr("2001:db8:1::1")
	LinkV4Prefix = netip.MustParsePrefix("198.51.100.0/24")
	LinkV6Prefix = netip.MustParsePrefix("2001:db8:1::/64")
)

// Hosts in the world. The allowed and denied IPv6 hosts sit in different
// /64s so that a policy can allow a whole prefix without allowing the other.
var (
	AllowedV4 = netip.MustParseAddr("203.0.113.10")
	DeniedV4  = netip.MustParseAddr("203.0.113.20")
	AllowedV6 = netip.MustParseAddr("2001:db8:2::10")
	DeniedV6  = netip.MustParseAddr("2001:db8:3::20")

	HostsV4Prefix   = netip.MustParsePrefix("203.0.113.0/24")
	AllowedV6Prefix = netip.MustParsePrefix("2001:db8:2::/64")
	DeniedV6Prefix  = netip.MustParsePrefix("2001:db8:3::/64")
)

// safePrefixes are the only non-loopback destinations tests may use.
var safePrefixes = []netip.Prefix{
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("2001:db8::/32"),
}

// Safe reports whether a test may send traffic to a: loopback, or the
// documentation ranges that only exist inside the test's namespaces.
// IPv4-mapped IPv6 addresses are judged by their IPv4 address.
func Safe(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() {
		return true
	}
	for _, p := range safePrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// SafePrefix reports whether every address of p is Safe and p is not a
// loopback prefix (routes and pod networks must not claim loopback).
func SafePrefix(p netip.Prefix) bool {
	if !p.IsValid() {
		return false
	}
	p = p.Masked()
	return !p.Addr().IsLoopback() && Safe(p.Addr()) && Safe(lastAddr(p))
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
