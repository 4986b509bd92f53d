// SPDX-License-Identifier: Apache-2.0

// Package addrclass classifies IP addresses by what they reach: the public
// internet, or something a name on the allowlist must never be turned into
// (loopback, private networks, link-local and cloud metadata, multicast,
// reserved ranges). It is the one rule book shared by the session's DNS
// resolver (dnsresolver), which drops such addresses from answers before
// the datapath learns them, and the allowlist proxy (proxy),
// which drops them from what it resolves before it dials: both must judge
// an answer the same way, and neither should import the other to do so.
//
// Decisions, and why:
//   - Platform-free and allocation-free: the resolver calls Rebinding for
//     every address of every forwarded answer on its fast path.
//   - IPv4-mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::/96) and 6to4
//     (2002::/16) addresses are judged by the IPv4 address inside: each is
//     a way of reaching that IPv4 host. Deprecated IPv4-compatible
//     addresses (::a.b.c.d) are refused outright.
//   - Cloud metadata endpoints (169.254.169.254, 169.254.170.2 and
//     fd00:ec2::254) are a Kind of their own, so a reason can name them,
//     although they lie inside link-local and ULA ranges.
//   - Documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
//     2001:db8::/32) are Public: they stand for public hosts in examples and
//     in sluice's own tests.
//   - IP literals the user put into the allowlist are not judged here: an
//     explicit IP or CIDR entry is the user's decision. Only addresses that
//     a name resolved to are (the allowlist entry's allow_private lifts it).
package addrclass
