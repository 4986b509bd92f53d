// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
)

// Loopback prefixes, always allowed by the datapath and therefore implicitly
// part of every machine policy when narrowing.
var (
	loopback4 = netip.MustParsePrefix("127.0.0.0/8")
	loopback6 = netip.MustParsePrefix("::1/128")
)

// IsLoopback reports whether a is a loopback address: 127.0.0.0/8, ::1, or
// an IPv4-mapped 127.0.0.0/8 address (::ffff:127.0.0.0/104), which the kernel
// delivers to the IPv4 loopback as well.
func IsLoopback(a netip.Addr) bool { return a.Unmap().IsLoopback() }

// addrTarget turns an IP literal into a full-length prefix.
func addrTarget(a netip.Addr) (target, error) {
	if a.Zone() != "" {
		return target{}, fmt.Errorf("IPv6 zones (%%%s) are not supported: a zone names a local interface, not a destination", a.Zone())
	}
	a = a.Unmap()
	if a.IsUnspecified() {
		// Connecting to 0.0.0.0 or :: reaches the local host, and people who
		// write it usually mean "any address": say how to write that.
		return target{}, fmt.Errorf("the unspecified address %s is not a destination; to allow every address write %s/0", a, a)
	}
	return target{kind: KindPrefix, prefix: netip.PrefixFrom(a, a.BitLen())}, nil
}

// prefixTarget parses a CIDR. Host bits are accepted and masked away
// (203.0.113.7/24 is 203.0.113.0/24): the intent is unambiguous, and the
// canonical form is what String and the file writer show.
func prefixTarget(addr, bits string) (target, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return target{}, fmt.Errorf("invalid address in CIDR: %w", err)
	}
	if a.Zone() != "" {
		return target{}, errors.New("IPv6 zones are not supported in a CIDR")
	}
	n, err := parseBits(bits, a.BitLen())
	if err != nil {
		return target{}, err
	}
	p := netip.PrefixFrom(a, n)
	// An IPv4-mapped prefix of at least /96 is really an IPv4 prefix: the
	// datapath applies the IPv4 rules to mapped destinations, so store it as
	// IPv4 where those rules look. A shorter one also spans ordinary IPv6
	// addresses and stays IPv6 (and, like every IPv6 prefix, never matches
	// an IPv4 address).
	if a.Is4In6() && n >= 96 {
		p = netip.PrefixFrom(a.Unmap(), n-96)
	}
	return target{kind: KindPrefix, prefix: p.Masked()}, nil
}

// parseBits is stricter than strconv.Atoi on purpose: "+8", "08" or "0x8"
// are most likely typos, and netip rejects them too.
func parseBits(s string, max int) (int, error) {
	if s == "" {
		return 0, errors.New("missing prefix length after '/'")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("invalid prefix length %q: it must be a decimal number", s)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("invalid prefix length %q: no leading zeros", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > max {
		family := "IPv4"
		if max == 128 {
			family = "IPv6"
		}
		return 0, fmt.Errorf("prefix length /%s is out of range: an %s prefix length is 0 to %d", s, family, max)
	}
	return n, nil
}

// normalizePrefix brings a caller-built prefix to the form prefixTarget
// produces.
func normalizePrefix(p netip.Prefix) (target, error) {
	if !p.IsValid() {
		return target{}, errors.New("invalid prefix")
	}
	return prefixTarget(p.Addr().String(), strconv.Itoa(p.Bits()))
}

// coveredBy reports whether the union of ms contains all of p. It splits p in
// halves only where some m overlaps it without containing it, so the work is
// bounded by the prefix length times the number of machine prefixes.
func coveredBy(p netip.Prefix, ms []netip.Prefix) bool {
	overlap := false
	for _, m := range ms {
		if m.Bits() <= p.Bits() && m.Contains(p.Addr()) {
			return true
		}
		if m.Overlaps(p) {
			overlap = true
		}
	}
	if !overlap || p.Bits() >= p.Addr().BitLen() {
		return false
	}
	lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
	hi := netip.PrefixFrom(setBit(p.Addr(), p.Bits()), p.Bits()+1)
	return coveredBy(lo, ms) && coveredBy(hi, ms)
}

// setBit returns a with bit i (0 = most significant) set.
func setBit(a netip.Addr, i int) netip.Addr {
	if a.Is4() {
		b := a.As4()
		b[i/8] |= 0x80 >> (i % 8)
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	b[i/8] |= 0x80 >> (i % 8)
	return netip.AddrFrom16(b)
}
