// SPDX-License-Identifier: Apache-2.0

// Package namecheck is a session's verifier: it judges the name a TCP
// connection's first bytes carry (the TLS ClientHello's SNI, the HTTP/1
// Host) before the connection reaches an address that is allowed only
// because the session's resolver learned it for an allowed name.
//
// Behind a CDN one address serves millions of names, chosen by SNI and
// Host, so an allowed name's address alone is open to all of them
// (curl --connect-to attacker.example:443:registry.npmjs.org:443). The
// datapath (bpf/verify.h) sends such connections to the session's
// verifier on loopback, keeping where they meant to go; the verifier peeks
// at the first flight (at most MaxFlight bytes, within FlightTimeout;
// PeekFlight leaves it queued), and either refuses the connection with a
// reset and a Refusal, or splices it to the original address, the flight
// first, untouched: by io.Copy (splice(2) on Linux) or, where the caller
// provides one (Config.Splice), in the kernel. On 80 and 443 the original
// address is dialled while the flight comes. No byte is decrypted and no
// certificate of sluice's is ever shown.
//
// What is checked: the name must be allowed by the session's policy (an
// exact or wildcard entry), not necessarily one the address was learned
// for. Requiring the exact pair would refuse clients that reuse an
// address across allowed names of one CDN (HTTP/2 coalescing does), and
// would keep nothing out: an allowed name reaches an allowed site
// wherever the CDN serves it. A ClientHello without SNI, one carrying an
// encrypted_client_hello extension (its inner SNI, the one the CDN routes
// by, is hidden; GREASE cannot be told from the real thing), an HTTP
// request without exactly one Host (or an absolute-form target naming
// another host), an IP literal as the name (unless the policy allows that
// address), and bytes that are neither TLS nor HTTP/1 are refused.
//
// The reading and the judgement (ReadFlight, Judge, Explain) are free of
// the datapath and the platform: the allowlist proxy judges the first
// flight of its tunnels with them, in every mode.
package namecheck
