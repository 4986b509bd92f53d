// SPDX-License-Identifier: Apache-2.0

// Command bench measures what sluice costs a confined program, side by side
// in one run: every figure is a pair of arms, A (unconfined) and B
// (confined), measured in alternating rounds (A B, then B A, to cancel
// drift and order effects), and reported as the median of each arm and the
// median of the per-round ratios B/A. It prints a markdown table on stdout,
// ready to paste into docs/benchmarks.md (its headline rows into README),
// preceded by a one-line machine summary; progress goes to stderr.
//
// What it measures:
//
//   - loopback TCP socket+connect+close and UDP sendto, run by a small worker
//     program (tests/bench/worker) that the driver builds and starts once
//     per round in each arm. The confined session holds 100,000 random CIDR
//     entries (half in 10.0.0.0/8, half in fd00::/8: map entries only, no
//     traffic goes there), so the figures include a loaded map. Targets:
//     B/A ≤ 1.05 for connect, ≤ 1.10 for sendto.
//   - a judged non-loopback connect: the worker, in a fresh network
//     namespace with no interface but a down loopback, connects to addresses
//     inside the CIDR set. The connect hook allows it through the LPM lookup
//     and the kernel then fails it at once for want of a route, so no packet
//     is ever sent anywhere. This is the cost of the LPM path; no target.
//   - a program's real cycle on an allowed remote address: socket,
//     setsockopt SO_LINGER and TCP_NODELAY, connect, close, to a listener on
//     203.0.113.77, which the driver puts on the loopback interface of the
//     worker's own fresh network namespace (so every packet stays there)
//     and the session allows with one CIDR beside the 100,000: the
//     connect goes through the LPM, every option through the setsockopt
//     hook, every packet through the egress hook. Target B/A ≤ 1.05. And
//     setsockopt(TCP_NODELAY) alone, which sluice never refuses but whose
//     hook it pays for: report only.
//   - a control: the TCP benchmark with both arms unconfined, whose ratio
//     shows how far apart two identical arms land on this machine today.
//     A ratio above its target by less than the control's spread says
//     little.
//   - `sluice run --user 65534:65534 -- true` against `true` executed
//     directly as uid 65534: wall time, target under 100 ms added; then the
//     same while another session holds the 100,000 CIDRs, since sessions
//     share the datapath's maps. When the target is missed and strace is
//     installed, one traced run shows where the time goes.
//   - DNS (-dns, on by default; -only dns runs it alone, in about a minute,
//     without root or the kernel): queries per second and latency of
//     sluice's resolver (package dnsresolver, in-process, default settings)
//     against the same upstream asked directly. A is straight to a stub
//     upstream (miekg/dns on 127.0.0.1 answering any *.bench.test name with
//     a 203.0.113.x A record, TTL 300 s); B is through the resolver, whose
//     policy allows *.bench.test and which forwards to that stub. The
//     resolver's Learner is an in-memory fake that counts: the kernel map
//     update is not part of these figures. A Go load generator, UDP on
//     loopback only, sends unique names (a random label per query, so
//     sluice forwards each; target B/A ≥ 0.6) and 100 repeated names
//     (warmed, so sluice answers from its cache; target B/A ≥ 1.0) closed
//     loop, 64 queries in flight; then unique names open loop at half the
//     direct arm's peak, where the p99 sluice adds must stay under 1 ms,
//     at half sluice's own peak and at 5,000 queries per second (report
//     only). The whole process's CPU
//     time per query comes with it, and -dns-cpuprofile profiles the
//     resolver in place.
//   - the allowlist proxy (-proxy, on by default; -only proxy runs it
//     alone, in about 15 s, without root): proxy in-process,
//     listening as `sluice run` does, against the same traffic sent
//     straight to a server on 127.0.0.1, arms alternating: new connections
//     per second (2 clients, each a CONNECT tunnel per connection, one
//     byte echoed, close; target B/A ≥ 0.5) and one stream's throughput
//     through a tunnel to a discarding server (target B/A ≥ 0.8).
//   - the daemon (-daemon, on by default; -only daemon runs it alone, in
//     about a minute): `sluice daemon` of the -sluice binary on an instance
//     of its own (<instance>-daemon), loopback socket API only, allowlist of
//     documentation CIDRs, resolver upstream 127.0.0.1:1 (nothing is
//     resolved). `true` as uid 65534 in a session created through the Go
//     client (api.Client.Run: create, spawn, exit) against a bare exec
//     of `true`, target under 15 ms added; the daemon's RSS idle and with
//     100 idle sessions of `sleep 60`; then 1,000 sessions of `true` from 6
//     concurrent clients, after which no session cgroup, datapath entry
//     (sessions, session_counters, session_events, cidrs, learned, a
//     non-zero listeners port), lock file, session record or daemon
//     descriptor beyond its idle level ±2 may be left: a leftover is a LEAK
//     row. When the session target is missed, strace and perf on the daemon
//     show where its time goes.
//
// Both worker arms take the same spawn path, cgroups.Session.Start (clone3
// into a cgroup, uid 65534, no_new_privs, no capabilities); they differ only
// in the cgroup: a session of an isolated sluice instance (SLUICE_INSTANCE,
// default "sluice-bench"), whose parent carries sluice's programs, or one
// under a sibling parent that carries none.
//
// Noise: the worker reports the median of 20 chunks of its loop and runs at
// nice -10 (both arms), and the per-round ratios are summarised by their
// median, so a busy moment moves one chunk or one round, not the result.
// The machine line gives the load average, the main source of noise left.
//
// Every loop is bounded, each worker run has a timeout and the whole run
// has one (-timeout). Within -budget it runs fewer rounds rather than
// overrun when the machine is slow, and says so. The instance, the sibling cgroup and the temporary
// directory are removed on the way out, also after an error or SIGINT /
// SIGTERM; leftovers of a run that was SIGKILLed are removed by the next.
//
// Usage (as root, from the module):
//
//	go run ./tests/bench -sluice bin/sluice [-rounds 15] [-cidrs 100000] [-scale 1]
//	go run ./tests/bench -sluice bin/sluice -dns=false -proxy=false -daemon=false -workers 'cycle|control'
//	                    (only the worker benchmarks whose name matches, beside the `sluice run` rows)
//	go run ./tests/bench -only daemon [-daemon-rounds 40] [-daemon-idle 100] [-daemon-sessions 1000] [-daemon-clients 6]
//	go run ./tests/bench -only dns [-dns-rounds 3] [-dns-time 1.5s] [-dns-workers 64] [-dns-cpuprofile dns.prof]
//	go run ./tests/bench -only proxy [-proxy-rounds 5] [-proxy-time 1s] [-proxy-clients 2]
package main
