// SPDX-License-Identifier: Apache-2.0

// Package proxy is sluice's allowlist proxy: one loopback port that speaks
// HTTP CONNECT, absolute-form HTTP and SOCKS5, and connects a confined
// program only to loopback and to what its session's policy allows. Where
// sluice cannot load BPF (macOS, Windows, Landlock on unprivileged Linux)
// the proxy is the only way out of the sandbox; in BPF sessions it gives
// programs that honour HTTP_PROXY host-name precision (Env sets the
// variables). Because it serves every mode, it is a room of its own rather
// than part of userspace/ (the backends of the modes without BPF), and it
// depends on neither the sandbox nor the sessions: only on the policy
// model (allowlist, addrclass) and on the name verifier's reading and
// judgement of a first flight (namecheck).
//
// # Rules
//
// A destination is allowed when it is
//
//   - a loopback address (127.0.0.0/8, ::1, IPv4-mapped loopback), or a
//     localhost name (RFC 6761), which is answered with 127.0.0.1 and ::1
//     and never resolved;
//   - an IP literal inside an IP or CIDR entry of the policy
//     (Policy.AllowsAddr);
//   - a host name the policy matches (Policy.MatchName), after
//     allowlist.NormalizeName (case, trailing dot, IDN to punycode).
//
// Nothing else: there are no built-in exceptions. An allowed name is
// resolved by the proxy (Config.Resolve: in a sluice session, the
// session's own resolver, in process) and only its normalized form is
// ever resolved. Addresses that addrclass.Rebinding rejects (loopback,
// private, link-local and cloud metadata, CGNAT, multicast, reserved...)
// are dropped from the answer unless the matching entry has allow_private,
// exactly as the session's DNS resolver does; if none is left the request
// is refused and the reason names the dropped addresses. Decisions are
// made before anything is sent towards a destination, and the policy is
// read again for every request (Config.Policy), so a policy swap applies
// to the next request.
//
// IP literals are refused unless an IP or CIDR entry covers them: a name
// entry is not a licence for whatever address a client claims the name
// has. Spellings of addresses that C resolvers accept but are not
// dotted-quad IPv4 ("127.1", "0x7f000001", "010.0.0.1") are neither IP
// literals nor valid names, and are refused without resolving.
//
// # Protocols
//
// The first byte tells the protocols apart: 0x05 is SOCKS5, 0x04 SOCKS4
// (answered with "rejected", 0x5B), anything else HTTP/1.x.
//
// CONNECT: the request target must be authority-form host:port; absolute
// URIs, paths, userinfo, a missing port and IPv6 without brackets are
// malformed (400). A Host header, if present, must name the same authority
// (the port may be left out of it, as some clients do); a CONNECT with a
// body (Content-Length other than 0, Transfer-Encoding) is malformed. After
// "200 Connection established" the connection is a byte pipe: whatever the
// client pipelined after the request head, a second CONNECT included, goes
// to the tunnel's destination unparsed (once its first flight passed the
// name check below, where there is one). There is no relayed or smuggled
// second target.
//
// Absolute-form HTTP (GET http://host/path): each request on a keep-alive
// connection is judged on its own, under the policy in force when it
// arrives. Origin-form requests (GET /path) are refused with 400: the proxy
// is not a web server. Only the http scheme is accepted (https is CONNECT's
// job). The Host header must name the URI's authority. Hop-by-hop headers
// (and those listed in Connection) and Proxy-Authorization are removed.
// Request bodies must have unambiguous framing: Content-Length, or
// Transfer-Encoding: chunked alone; both together, several lengths or
// another coding are refused rather than repaired, since disagreement on
// framing is how requests are smuggled. The request is sent upstream in
// origin form with sluice's own framing, and the response is re-framed
// for the client (Content-Length, else chunked, else close). Upstream
// connections are never reused: each request dials after its own decision
// and sends "Connection: close", so no request rides on a connection that
// another decision opened. The body is sent while the response is read,
// so 100 Continue and early answers work; a body that turns out malformed
// half way ends the exchange with 400. Upgrade is hop-by-hop and therefore
// not forwarded; WebSocket clients use CONNECT.
//
// SOCKS5 (RFC 1928): the "no authentication" method only (the port is
// reachable from the session only; a password would protect nothing; a
// client without it gets 0xFF), CONNECT only (BIND and UDP ASSOCIATE get
// 0x07), address types IPv4, IPv6 and domain name (others get 0x08); a domain name is resolved by the proxy under the rules
// above (socks5h). A refusal is 0x02 "connection not allowed by ruleset";
// resolution failures 0x04, refused connections 0x05, other dial errors
// 0x01/0x03/0x04. A wrong version, a non-zero reserved byte or a
// truncated message closes the connection without a reply.
//
// # Names in tunnels
//
// Behind a CDN an allowed name's address serves every other name too,
// chosen by the TLS SNI and the HTTP Host: CONNECT cdn.example:443 and
// then a ClientHello for attacker.example is domain fronting. So a CONNECT
// or SOCKS5 tunnel to an allowed name is checked as the datapath checks a
// connection to a learned address (allowlist.Verify.ChecksTCP: TCP 80 and
// 443 by default, every port with "verify": "name", none with "address"):
// once the tunnel is answered, its first flight is read (within Timeout)
// and judged with package namecheck, and only then written upstream, bytes
// untouched. A name the policy does not allow, no name, an Encrypted
// ClientHello, or nothing in time resets the client's connection; the
// EventRefused carries the Flight and names the tunnel's own name as the
// one the address was allowed for. IP literals, addresses an IP or CIDR
// entry allows on the port, and loopback are judged by address. The
// upstream connection is opened first, so an unreachable destination
// still gets its 502 or SOCKS5 error, but nothing is written to it before
// the verdict.
//
// # Answers
//
// HTTP refusals are 403 with a text/plain body that says what was refused
// and why ("sluice: CONNECT to evil.example:443 refused: evil.example is not
// in the allowlist") and a Proxy-Status header (RFC 9209); malformed
// requests are 400 (408 for a head that does not arrive, 431 for one that
// is too large), an upstream that cannot be reached is 502 (504 on a
// timeout). After any of these the connection is closed, so nothing the
// client sent after the refused head is ever interpreted. Every refusal,
// malformed request and failure is also an Event for the audit log and the
// terminal (Config.OnEvent); allowed requests raise no event, only
// counters (Stats), as in the datapath.
//
// # Limits
//
// Every wait before a connection is established is bounded by
// Config.Timeout: the request head or SOCKS5 handshake, each reply
// written, the resolution and the dial (all addresses of a name share it,
// each getting at least 2 s), and a checked tunnel's first flight (at most
// namecheck.MaxFlight bytes). Heads are limited to 64 KiB. Once a tunnel is
// open or a request is being forwarded, there is no deadline: a tunnel
// lives as long as its two ends, as a direct connection would (TCP
// keep-alive finds dead remote peers; the kernel already knows when a
// loopback peer ends), and Close ends them all.
//
// # Data path
//
// Tunnels copy between the raw connections with io.Copy, after draining
// the bytes the handshake reader had buffered, so that on Linux two
// *net.TCPConn meet and the kernel splices (splice(2)) without copying
// through user buffers. The end of one direction is passed on with
// CloseWrite (a FIN), so half-closed protocols work; an error closes both.
//
// # Sessions
//
// One Proxy serves one policy. Loopback is open to every confined
// process, so a session's program could dial another session's proxy and
// borrow its wider policy: Config.Admit is called on every accepted
// connection, before a byte is read, for the daemon to check that the peer
// belongs to the session (or the datapath refuses the other sessions'
// ports). Env returns the environment variables that point a command at
// its proxy.
//
// # Dialing and namespaces
//
// Config.Dial opens upstream connections, a net.Dialer by default. The
// proxy's tests run its listener inside a network namespace and pass a
// Dial that opens each socket on a thread inside that namespace, because
// a socket belongs to the namespace of the thread that creates it, not to
// that of the listener; a daemon can use the same hook to mark or bind
// its sockets.
package proxy
