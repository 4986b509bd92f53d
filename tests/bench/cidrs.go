// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math/rand/v2"
	"net/netip"
)

// randomPrefixes returns n distinct prefixes, the first half IPv4 inside
// 10.0.0.0/8 (lengths /16 to /32), the rest IPv6 inside fd00::/8 (lengths
// /16 to /128). Mixed lengths give the LPM trie the depth a real allowlist
// would, rather than n leaves of one length.
func randomPrefixes(r *rand.Rand, n int) []netip.Prefix {
	seen := make(map[netip.Prefix]bool, n)
	out := make([]netip.Prefix, 0, n)
	add := func(p netip.Prefix) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for len(out) < n/2 {
		var a [4]byte
		v := r.Uint32()
		a[0], a[1], a[2], a[3] = 10, byte(v>>16), byte(v>>8), byte(v)
		add(netip.PrefixFrom(netip.AddrFrom4(a), 16+r.IntN(17)).Masked())
	}
	for len(out) < n {
		var a [16]byte
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		a[0] = 0xfd
		add(netip.PrefixFrom(netip.AddrFrom16(a), 16+r.IntN(113)).Masked())
	}
	return out
}

// addrIn returns a random address inside p.
func addrIn(r *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		// Bits of byte i that belong to the prefix; the rest are random.
		fixed := min(max(p.Bits()-8*i, 0), 8)
		mask := byte(0xff << (8 - fixed))
		b[i] = b[i]&mask | byte(r.Uint32())&^mask
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// targets picks k addresses inside distinct random prefixes of one family,
// so that the judged connects walk different paths of the trie.
func targets(r *rand.Rand, prefixes []netip.Prefix, ipv4 bool, k int) []netip.Addr {
	var fam []netip.Prefix
	for _, p := range prefixes {
		if p.Addr().Is4() == ipv4 {
			fam = append(fam, p)
		}
	}
	out := make([]netip.Addr, 0, k)
	for _, i := range r.Perm(len(fam))[:min(k, len(fam))] {
		out = append(out, addrIn(r, fam[i]))
	}
	return out
}
