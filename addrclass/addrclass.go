// SPDX-License-Identifier: Apache-2.0

package addrclass

import "net/netip"

// Kind is what an address reaches.
type Kind uint8

// The kinds, Public first: the zero Kind is the address a public name may
// have.
const (
	Public      Kind = iota // the internet
	Invalid                 // the zero netip.Addr
	Unspecified             // 0.0.0.0/8, ::
	Loopback                // 127.0.0.0/8, ::1
	Private                 // RFC 1918, CGNAT (RFC 6598), ULA (fc00::/7)
	LinkLocal               // 169.254.0.0/16, fe80::/10
	Metadata                // cloud metadata endpoints (inside link-local or ULA)
	Multicast               // 224.0.0.0/4, ff00::/8
	Reserved                // IETF, benchmarking, 240.0.0.0/4, discard-only, site-local, IPv4-compatible
)

var kindNames = [...]string{
	Public: "public", Invalid: "invalid", Unspecified: "unspecified", Loopback: "loopback",
	Private: "private", LinkLocal: "link-local", Metadata: "metadata", Multicast: "multicast",
	Reserved: "reserved",
}

// String is the kind's name in lower case ("link-local").
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// span is a range of one kind, with the reason a user reads.
type span struct {
	prefix netip.Prefix
	kind   Kind
	why    string
}

// metadata are the cloud metadata endpoints, inside link-local and ULA
// ranges of spans.
var metadata = []span{
	{netip.MustParsePrefix("169.254.169.254/32"), Metadata, "link-local (cloud metadata)"},
	{netip.MustParsePrefix("169.254.170.2/32"), Metadata, "link-local (cloud metadata, container credentials)"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), Metadata, "unique local (ULA, cloud metadata)"},
}

// spans are the address ranges that an allowed public name must not point
// a confined program at.
var spans = []span{
	{netip.MustParsePrefix("0.0.0.0/8"), Unspecified, "unspecified / this network"},
	{netip.MustParsePrefix("10.0.0.0/8"), Private, "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), Private, "carrier-grade NAT (RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), Loopback, "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), LinkLocal, "link-local (cloud metadata)"},
	{netip.MustParsePrefix("172.16.0.0/12"), Private, "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), Reserved, "IETF protocol assignments"},
	{netip.MustParsePrefix("192.168.0.0/16"), Private, "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), Reserved, "benchmarking (RFC 2544)"},
	{netip.MustParsePrefix("224.0.0.0/4"), Multicast, "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), Reserved, "reserved / broadcast"},
	{netip.MustParsePrefix("::/128"), Unspecified, "unspecified"},
	{netip.MustParsePrefix("::1/128"), Loopback, "loopback"},
	{netip.MustParsePrefix("100::/64"), Reserved, "discard-only"},
	{netip.MustParsePrefix("fc00::/7"), Private, "unique local (ULA)"},
	{netip.MustParsePrefix("fe80::/10"), LinkLocal, "link-local"},
	{netip.MustParsePrefix("fec0::/10"), Reserved, "site-local"},
	{netip.MustParsePrefix("ff00::/8"), Multicast, "multicast"},
}

var (
	nat64    = netip.MustParsePrefix("64:ff9b::/96")
	sixto4   = netip.MustParsePrefix("2002::/16")
	v4compat = netip.MustParsePrefix("::/96")
)

// Classify returns the kind of a and, for every kind but Public, the
// reason a user reads ("private (RFC 1918)"). Zones are ignored; embedded
// IPv4 addresses are judged by the IPv4 address (see the package comment).
func Classify(a netip.Addr) (Kind, string) {
	if !a.IsValid() {
		return Invalid, "invalid address"
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
		return Reserved, "deprecated IPv4-compatible IPv6"
	}
	for _, s := range spans {
		if !s.prefix.Contains(a) {
			continue
		}
		// Only addresses already refused can be metadata endpoints: a
		// public address never pays for this second look.
		if s.kind == LinkLocal || s.kind == Private {
			for _, m := range metadata {
				if m.prefix.Contains(a) {
					return m.kind, m.why
				}
			}
		}
		return s.kind, s.why
	}
	return Public, ""
}

// Rebinding reports whether an allowed name's answer may not point at a
// (anything but Public), and why: DNS rebinding protection. The resolver
// and the proxy drop such addresses unless the matching allowlist entry
// has allow_private.
func Rebinding(a netip.Addr) (why string, bad bool) {
	k, why := Classify(a)
	return why, k != Public
}
