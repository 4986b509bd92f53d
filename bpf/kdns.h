// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

/* The kernel DNS path (issue 13): what its two compilation units share.
 * Its maps (which the main object, sluice.c, declares too: its connect,
 * sendmsg and recvmsg programs read kdns_sessions and resolver_beats, and
 * the loader hands the main object's maps to the kernel DNS object), the
 * return values and the socket test both sides use. The parsers, judges
 * and programs are in kdns.c, their own object (loader/kdns_bpfel.o).
 *
 * A session with KDNS_ON sends its UDP DNS straight to its upstream
 * (connect4/6 and sendmsg4/6 rewrite port 53 there; recvmsg and getpeername
 * restore the server the program asked). Two skb programs judge what flows:
 *
 *   egress  A canonical query (one question, class IN, type A or AAAA, no
 *           answer or authority records, at most a bare OPT, no trailing
 *           bytes) for a name the session allows passes and is recorded
 *           (socket cookie, ID, name). Anything else is dropped before it
 *           leaves and handed to user space on the session's ring buffer:
 *           the session's resolver answers it (REFUSED, or the general path)
 *           and injects the answer with the upstream as its source.
 *   ingress An answer must match a recorded query (cookie, ID, upstream,
 *           question) or it is dropped. The A/AAAA records of the CNAME
 *           chain that starts at the asked name are learned before the
 *           datagram is queued to the socket. An answer the kernel cannot
 *           judge as a whole (other owners or types, a private address
 *           without allow_private, a TTL above the maximum, more addresses
 *           than the cap, a full map, truncation) is dropped and handed to
 *           user space, which resolves the question itself and injects the
 *           filtered answer.
 *
 * The path choice therefore happens per datagram at skb time, the only
 * place where the query's bytes are visible; the socket is redirected to
 * the upstream at connect/sendmsg time whenever it is UDP, and user space
 * answers what the kernel does not pass. With no user space (the daemon is
 * restarting), passed queries and judged answers keep working and the rest
 * is dropped silently, so clients retry.
 *
 * Dropping on egress returns 2 (drop with congestion notification): UDP
 * sendmsg then succeeds, as a lost datagram would, and the client waits for
 * the injected answer instead of failing with EPERM.
 *
 * Every variable-length walk is a bpf_loop. */

#ifndef SLUICE_KDNS_H
#define SLUICE_KDNS_H

#include "common.h"

/* The maps. Both objects declare them from here; the loader creates them
 * with the datapath (sluice.c) and hands them to the kernel DNS object
 * (kdns.c), so each is one kernel map, pinned under its name. */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KDNS_MAX_SESSIONS);
	__type(key, __u64);
	__type(value, struct kdns_session);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} kdns_sessions SEC(".maps");

/* resolver_beats: per failover session, until when (bpf_ktime_get_ns)
 * its resolver was last seen answering. A resolver whose socket is bound
 * but that no longer answers (its process stopped, its loop stuck) stops
 * refreshing it, and the session's DNS fails over as if it were dead. No
 * entry: judged by the socket alone (before the first beat). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KDNS_MAX_SESSIONS);
	__type(key, __u64);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} resolver_beats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KDNS_MAX_NAMES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct kdns_name_key);
	__type(value, struct kdns_name);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} kdns_names SEC(".maps");

/* An LRU: a query whose answer never came is forgotten by itself, and a
 * forgotten query only costs its (late) answer. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, KDNS_MAX_QUERIES);
	__uint(map_flags, BPF_F_NO_COMMON_LRU); /* per-CPU lists: no shared lock */
	__type(key, struct kdns_query_key);
	__type(value, struct kdns_query);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} kdns_queries SEC(".maps");

/* kdns_learned_from: per session and address, the query whose answer the
 * kernel path last learned the address from, for its name: a later
 * refusal on that address says which name it was allowed for, as the
 * resolver path's does. An LRU, since it explains and decides nothing: an
 * evicted entry only leaves a line without the name. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, KDNS_MAX_LEARNED_FROM);
	__type(key, struct learned_key);
	__type(value, struct kdns_query);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} kdns_learned_from SEC(".maps");

/* One ring buffer per session with a reader of its own (sluice run), as
 * for deny events; kdns_events for sessions a daemon serves. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, KDNS_MAX_SESSIONS);
	__type(key, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_RINGBUF);
		__uint(max_entries, KDNS_RINGBUF_SIZE);
	});
} kdns_session_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, KDNS_RINGBUF_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} kdns_events SEC(".maps");

/* Queries the kernel path judged allowed and sent upstream itself (user
 * space never sees them), per CPU: the daemon's DNS metrics read it at
 * scrape time. Pinned, so it keeps counting while the daemon restarts. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} kdns_counts SEC(".maps");

/* Force the types of the path's records into BTF for bpf2go -type (the
 * datapath's generated Go declares them). */
const struct kdns_event *unused_kdns_event __attribute__((unused));
const struct kdns_name_key *unused_kdns_name_key __attribute__((unused));
const struct kdns_name *unused_kdns_name __attribute__((unused));
const struct kdns_query_key *unused_kdns_query_key __attribute__((unused));
const struct kdns_query *unused_kdns_query __attribute__((unused));

/* kdns_socket returns the DNS origin of the datagram's socket when the
 * socket was redirected to the session's upstream (pad == 1), else NULL. */
static __always_inline struct dns_orig *kdns_socket(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	if (!sk)
		return 0;
	sk = bpf_sk_fullsock(sk);
	if (!sk || sk->protocol != IPPROTO_UDP)
		return 0;
	struct dns_orig *o = bpf_sk_storage_get(&dns_origins, sk, 0, 0);
	if (!o || o->pad != 1)
		return 0;
	return o;
}

/* KDNS_INJECT_MARK is the skb mark of the answers user space injects
 * (loader.KDNSInjectMark). */
#define KDNS_INJECT_MARK 0x51ce0053

/* Return values of cgroup_skb/egress: 1 pass, 2 drop quietly (see above). */
#define KDNS_PASS 1
#define KDNS_DROP_QUIET 2

#endif /* SLUICE_KDNS_H */
