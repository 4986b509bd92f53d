// SPDX-License-Identifier: Apache-2.0

// Package world builds a throwaway "internet" for sluice's end-to-end tests:
// two fresh network namespaces joined by a veth pair.
//
//	client namespace                      world namespace
//	  lo (up)                               lo: the hosts AllowedV4, DeniedV4,
//	  sl-client 198.51.100.2/24  <-veth->       AllowedV6, DeniedV6
//	            2001:db8:1::2/64            sl-world 198.51.100.1/24
//	  default via 198.51.100.1                       2001:db8:1::1/64
//	  default via 2001:db8:1::1             servers started by the test,
//	                                        an AF_PACKET sniffer on sl-world
//
// The programs under test run in the client namespace; everything they send
// can only go to the world, where the sniffer records every IPv4 and IPv6
// packet that arrives from the client. The sniffer, not the servers, is the
// recorder of record: a containment test passes only when nothing matching
// arrived (AssertNothingArrived), because EPERM in the client alone does not
// prove that no packet left.
//
// Only documentation ranges are used: 198.51.100.0/24, 203.0.113.0/24 and
// 2001:db8::/32 (Safe reports whether an address is one of them, or
// loopback). 192.0.2.0/24 is this machine's uplink and must never be used.
//
// Decisions worth knowing:
//
//   - Namespaces are named (/run/netns/sluice-c-XXXXXXXX, sluice-w-XXXXXXXX) so
//     that `nsenter --net=PATH` and `ip netns list` see them; they are created
//     with unshare+bind mount on a thread that is then discarded, and removed
//     by t.Cleanup, also when the test fails.
//   - Code enters a namespace only on a goroutine locked to a fresh OS thread
//     that is never unlocked: when the goroutine returns, the Go runtime
//     destroys the thread, so no thread ever goes back to the scheduler in
//     the wrong namespace, even if restoring it would have failed.
//   - IPv6 addresses are added with IFA_F_NODAD and DAD is off in both
//     namespaces, so the world is usable as soon as New returns; New still
//     waits (bounded) until no address is tentative.
//   - The client keeps the kernel's connected routes for the link prefixes
//     besides its two default routes: there is no other route anywhere,
//     unless a test puts addresses behind the client (a node's pods in
//     their own namespaces): RouteToClient then routes their prefix in the
//     world via the client and turns on forwarding in the client namespace
//     only, so replies reach them and the servers see their own addresses.
//   - The world has net.ipv4.tcp_fastopen=3 and TFO-enabled TCP servers, so
//     a repeated TCP Fast Open attempt really carries data in its SYN.
//     net.ipv6.conf.all.seg6_enabled=0 (the default) in the world: packets
//     with a segment routing header are recorded by the sniffer and then
//     dropped by the world's IPv6 stack.
//   - Source routing, measured on Linux 6.18 with no confinement (the tests
//     TestSegmentRoutingHeader* and TestLooseSourceRoute keep these true):
//     a sticky IPV6_RTHDR type-4 header (setsockopt, no privilege needed) on a
//     TCP or UDP socket that names AllowedV6 sends the packet to its first
//     segment, DeniedV6, with segments_left=1 and segments[0] rewritten to
//     AllowedV6; the world drops it (seg6_enabled=0), so the connect times
//     out. The same header in an IPV6_RTHDR cmsg is refused by sendmsg with
//     EINVAL and nothing leaves. An IPv4 LSRR option (IP_OPTIONS, no
//     privilege) whose first hop is DeniedV4 sends a connect() to AllowedV4
//     to DeniedV4, carrying AllowedV4 in the option's slot; the world drops
//     it (accept_source_route=0).
//   - The probe (tests/probe) is built once per test binary by BuildProbe into
//     a world-readable directory, so it can run as uid 65534; TestMain should
//     call RemoveProbe.
package world
