package dnsresolver

import "net/netip"

// rebindingRanges are address ranges that an allowed public name must not
// point a confined program at, with the reason a user reads.
var rebindingRanges = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified / this network"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking (RFC 2544)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved / broadcast"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (ULA)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

var (
	nat64    = netip.MustParsePrefix("64:ff9b::/96")
	sixto4   = netip.MustParsePrefix("2002::/16")
	v4compat = netip.MustParsePrefix("::/96")
)

// Rebinding reports whether an answer may not point at a, and why.
func Rebinding(a netip.Addr) (why string, bad bool) {
	if !a.IsValid() {
		return "invalid address", true
	}
	a = a.WithZone("")
	switch {
	case a.Is4In6():
		a = a.Unmap()
	case nat64.Contains(a):
		b := a.As16()
		a = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	case sixto4.Contains(a):
		b := a.As16()
		a = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
	case v4compat.Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback():
		return "deprecated IPv4-compatible IPv6", true
	}
	for _, r := range rebindingRanges {
		if r.prefix.Contains(a) {
			return r.why, true
		}
	}
	return "", false
}
