// SPDX-License-Identifier: Apache-2.0

// Package dnsresolver is a session's local DNS resolver: it answers only
// names the session's policy allows, forwards them upstream, and teaches the
// datapath the addresses of the answer before the answer reaches the
// client, so the first connect never races the map.
//
// Decisions, and why:
//   - A name that is not allowed gets REFUSED at once and is never
//     forwarded: a query name cannot carry data out. (--audit forwards it
//     and reports it instead.)
//   - Only the A and AAAA records of the CNAME chain that starts at the
//     asked name are kept and learned; records for other owner names are
//     removed, so an upstream cannot smuggle an address for an unrelated
//     name into the client's cache.
//   - DNS rebinding: addresses that are loopback, private (RFC 1918, ULA),
//     link-local (cloud metadata lives there), CGNAT, multicast,
//     unspecified or reserved are removed from the answer and not learned,
//     unless the matching allowlist entry has allow_private. IPv4-mapped,
//     NAT64 and 6to4 addresses are judged by the IPv4 address inside. The
//     rules live in addrclass, which the allowlist proxy applies too.
//   - HTTPS/SVCB records keep their other parameters but lose their
//     ipv4hint/ipv6hint: hints would be addresses nobody learned, and
//     clients fall back to A/AAAA, which are learned.
//   - TTLs are clamped to [MinTTL, MaxTTL] (defaults 5 s and 1 h). The kernel
//     refuses a learned IP Grace (default 10 s) after its TTL, without
//     waiting for the garbage collector; a learned IP's expiry only ever
//     grows, so a short TTL of one name never cuts another name's entry.
//   - Bounded: at most MaxIPsPerName learned addresses per name (default
//     64), and the datapath's map size. Reaching either gives SERVFAIL and
//     an event: fail closed, loudly, never evicting a live entry.
//   - Upstream: a few UDP sockets are reused (a socket per query halves
//     throughput) and replaced after a number of queries so the source port
//     still changes; query IDs are random and a reply must match the ID and
//     the question or it is dropped. Truncated replies are retried over TCP.
//     Each query is bounded by Timeout per upstream; when all fail, SERVFAIL.
//   - Answers are cached for their (clamped) TTL; a cache hit needs no
//     datapath update because the learned entry outlives the cache entry.
//   - UDP has a loop of its own (udpserve.go): queries and replies move in
//     batches (recvmmsg/sendmmsg), cache hits are answered from packed
//     bytes, forwarded queries wait for their answers without a goroutine
//     each, and the commonest answer (A or AAAA records of the asked name
//     only) is filtered as bytes (acceptWire, fuzzed against FilterAnswer).
//     Anything unusual, and TCP, goes through Resolve and miekg/dns.
//   - PTR queries are answered from what the session learned, or refused.
//   - localhost names are answered locally with loopback addresses.
//   - Ask mode (Config.Ask): a name the policy does not allow is held on
//     the general path while a person decides (package prompts), for at
//     most AskHold (DefaultAskHold); past it, REFUSED. An approval
//     forwards and learns it like an allowed name; a name allowed for
//     the session (AllowName) joins a per-session set the filter
//     consults after the policy, so later queries take the fast path.
package dnsresolver
