// SPDX-License-Identifier: Apache-2.0

// Package allowlist is sluice's policy model: which destinations a confined
// process may reach besides loopback. It parses network_allowlist.json and
// --allow entries, normalizes and matches host names, IP addresses and CIDRs,
// and checks that a session policy only narrows the machine's policy. It is
// platform-free and does no I/O beyond reading a policy file.
//
// # Entries
//
// An entry is one of:
//
//   - a host name, "api.example.com": that name only;
//   - a wildcard, "*.example.com": every name strictly under example.com, at
//     any depth (a.example.com, a.b.example.com), but not example.com itself.
//     The apex is a different name, often served by different hosts, so
//     allowing it takes its own entry; this is also how TLS certificates read
//     wildcards, minus the depth limit. The wildcard must be the whole
//     leftmost label and be followed by at least two labels: "*", "*.com",
//     "*foo.example.com" and "a.*.example.com" are rejected. Wildcards over
//     multi-label public suffixes (*.co.uk) are accepted: the public suffix
//     list changes with every release, and a policy that is valid today must
//     stay valid after an upgrade;
//   - an IP address, "203.0.113.5" or "2001:db8::1": a /32 or /128 prefix;
//   - a CIDR, "203.0.113.0/24": its host bits are masked (203.0.113.7/24 is
//     stored and shown as 203.0.113.0/24).
//
// IPv4-mapped IPv6 addresses and prefixes of /96 or longer are converted to
// IPv4 (::ffff:203.0.113.0/120 is 203.0.113.0/24), as the datapath applies the
// IPv4 rules to mapped destinations. An IPv6 prefix never matches an IPv4
// address, even ::/0. A bracketed IPv6 address, "[2001:db8::1]", is accepted
// as the address, since that is how it is pasted from URLs. Zoned addresses
// (fe80::1%eth0) and the unspecified addresses 0.0.0.0 and :: are rejected;
// 0.0.0.0/0 and ::/0 are accepted and mean every address of the family.
//
// URLs ("https://api.example.com/v1") and ports ("api.example.com:443") are
// rejected with a message giving the host to write instead. The policy acts
// where connections are made and names resolved, where there is no scheme
// or path to check, and DNS answers carry no port: accepting a URL or a port
// would look like a restriction that is not enforced. Allowing a host allows
// all of its ports.
//
// # Names
//
// Host names in entries and in queries go through NormalizeName: ASCII
// letters are lower-cased, one trailing dot is removed, and non-ASCII labels
// are converted to punycode with the idna.Lookup profile (RFC 5891 lookup
// with UTS #46 mapping, non-transitional, STD3 rules and the Bidi rule), so
// "Bücher.Example." is "xn--bcher-kva.example". The result must be a DNS name:
// at most 253 characters, labels of 1 to 63 letters, digits, '-' or '_', not
// starting or ending with '-'. ASCII labels are deliberately not put through
// the STD3 and hyphen rules of IDNA, because names such as _acme.example.com
// and r3---sn-x.example.net resolve in practice; labels starting "xn--" must
// be valid punycode. A name whose last label is numeric ("127.1",
// "0x7f000001") is rejected, so that no name entry can mean an address.
//
// # Policies
//
// A Policy is immutable and safe for concurrent use. Duplicate entries are
// merged at the position of their first occurrence. Each entry records every
// request for it, an owner (or none) and whether that owner allows private
// addresses (allow_private), so that Without removes exactly what one owner
// added, and Format writes it all back.
//
// Loopback (127.0.0.0/8, ::1, and IPv4-mapped 127.0.0.0/8) is always allowed
// by the datapath and is not represented as entries: an empty policy allows
// loopback only. Entries for loopback addresses or for "localhost" are
// accepted and kept, and are simply redundant.
//
// allow_private lets the resolver learn private, loopback, link-local and
// metadata addresses from DNS answers for the names an entry matches; without
// it such answers are dropped, so a public name cannot be pointed at an
// internal service. It applies to name entries only. When several entries
// match a name the most specific one decides (see Policy.MatchName),
// including whether private addresses are allowed.
//
// # The local part: unix sockets and loopback
//
// Besides allowed_hosts a policy file may hold "unix_sockets" (socket paths
// a session may connect or send to, exact or with '*' inside one path
// component, "@name" for an abstract socket), "loopback" ("all", the
// default, or "session") and "loopback_ports" (what "session" mode still
// allows). They form the policy's Local part (local.go). Paths must be
// absolute and clean, because the datapath compares them as bytes with
// the address a program passes to connect(). A session's Local narrows the
// machine's when each of its unix sockets is covered by a machine entry
// (a machine glob covers a session glob when it matches the glob's text,
// '*' read as a character: '*' never stands for '/', so it then matches
// every expansion too), and, under a machine in "session" mode, the session
// is in "session" mode too and lists only machine ports.
package allowlist
