// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

/* What every program family of the datapath shares: the maps (the sessions,
 * their CIDRs and learned IPs, counters, events, the DNS origins of
 * redirected sockets), the verdict record and the helpers that judge an
 * address, count and emit (and the IPv4 source-route parser that setsockopt
 * and egress both use). */

#ifndef SLUICE_COMMON_H
#define SLUICE_COMMON_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "sluice.h"

#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define SOCK_DGRAM 2
#define SOL_IP 0
#define SOL_IPV6 41
#define IP_OPTIONS 4
#define IPV6_2292RTHDR 5
#define IPV6_2292PKTOPTIONS 6
#define IPV6_RTHDR 57
#define NEXTHDR_HOP 0
#define NEXTHDR_ROUTING 43
#define NEXTHDR_DEST 60
#define EPROTONOSUPPORT 93

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SESSIONS);
	__type(key, __u64);
	__type(value, struct session);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sessions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_SESSIONS);
	__type(key, __u64);
	__type(value, struct counters);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} session_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, MAX_CIDRS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct cidr_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cidrs SEC(".maps");

/* A plain hash, not an LRU: an LRU would evict a live entry silently. The
 * resolver answers SERVFAIL when it is full (fail closed, loudly). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LEARNED);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct learned_key);
	__type(value, struct learned_value);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} learned SEC(".maps");

/* One ring buffer per session, so that concurrent `sluice run`s (each its
 * own reader) never consume each other's events. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, MAX_SESSIONS);
	__type(key, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_RINGBUF);
		__uint(max_entries, SESSION_RINGBUF_SIZE);
	});
} session_events SEC(".maps");

/* Loopback ports on which sluice serves a session (its proxy, its
 * resolver), indexed by port, holding the owning session's cgroup id; 0 for
 * every other port. Loopback is open to every session, so without this a
 * confined process could borrow another session's proxy and its wider
 * policy. An array lookup is inlined by the verifier: the loopback fast
 * path stays free of helper calls. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} listeners SEC(".maps");

/* Unix socket names a session may reach besides its own sockets: its
 * allowlist's unix_sockets, the built-in list and the sluice API socket,
 * written by user space per session (see loader/unix.go). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_UNIX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct unix_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} unix_allowed SEC(".maps");

/* Loopback ports a session in loopback "session" mode may reach: its
 * loopback_ports (PORT_LISTED) and the ports its processes bound
 * (PORT_BOUND, written by post_bind4/6). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LOOPBACK_PORTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct port_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} loopback_ports SEC(".maps");

/* One entry, non-zero once a session in loopback "session" mode has been
 * registered on this machine. Until then a loopback connect costs the
 * sessions in the default mode this one inlined array lookup and nothing
 * else; afterwards it costs them a session lookup too. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} loopback_strict SEC(".maps");

/* Session aliases: a cgroup with no session of its own whose descendants
 * belong to another cgroup's session, by its cgroup id. A `sluice run
 * --docker` session's build parent is one: the engine makes a build's RUN
 * containers (cgroups it names itself, as it starts them) below it, and
 * they are the session's from their first instruction, with no attach to
 * race. Only a cgroup with no session entry looks here (an entry of its
 * own always wins), and only while aliases_on is set, so sessions without
 * aliases pay one inlined array lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SESSIONS);
	__type(key, __u64);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} session_aliases SEC(".maps");

/* One entry, non-zero once an alias has been written on this machine. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} aliases_on SEC(".maps");

/* How deep below the cgroup root an alias is looked for: sluice's root, a
 * build parent and the engine's container cgroup sit well above it. */
#define ALIAS_DEPTH 16

static __always_inline int aliases_unused(__u64 cg)
{
	__u32 zero = 0;
	__u32 *on = bpf_map_lookup_elem(&aliases_on, &zero);

	return !on || !*on || bpf_map_lookup_elem(&sessions, &cg);
}

/* alias_target is the target of cg's deepest aliased ancestor, or cg. */
static __always_inline __u64 alias_target(__u64 cg)
{
	__u64 found = cg;
	for (int lvl = 1; lvl <= ALIAS_DEPTH; lvl++) {
		__u64 a = bpf_get_current_ancestor_cgroup_id(lvl);
		if (!a)
			break;
		__u64 *t = bpf_map_lookup_elem(&session_aliases, &a);
		if (t)
			found = *t;
	}
	return found;
}

/* session_cgroup is the session whose rules apply to current: its own
 * cgroup's, or the deepest aliased ancestor's target; with neither, its
 * own cgroup id (no session: refused all but loopback). For a hook that
 * looks the session's entry up anyway, session_of is cheaper. */
static __always_inline __u64 session_cgroup(void)
{
	__u64 cg = bpf_get_current_cgroup_id();

	if (aliases_unused(cg))
		return cg;
	return alias_target(cg);
}

/* session_of is session_cgroup together with that session's entry (*sp;
 * NULL: no session). It costs one sessions lookup for a process of a
 * session whether or not any alias exists on the machine, where
 * session_cgroup followed by a lookup takes two once one does. */
static __always_inline __u64 session_of(struct session **sp)
{
	__u64 cg = bpf_get_current_cgroup_id();
	struct session *s = bpf_map_lookup_elem(&sessions, &cg);
	__u32 zero = 0;
	__u32 *on = 0;

	if (!s)
		on = bpf_map_lookup_elem(&aliases_on, &zero);
	if (s || !on || !*on) {
		*sp = s;
		return cg;
	}
	__u64 found = alias_target(cg);
	*sp = found == cg ? 0 : bpf_map_lookup_elem(&sessions, &found);
	return found;
}

/* skb_session_cgroup is session_cgroup for the socket of a packet (egress
 * may run in softirq, where current is nobody's). */
static __always_inline __u64 skb_session_cgroup(struct __sk_buff *skb)
{
	__u64 cg = bpf_skb_cgroup_id(skb);

	if (aliases_unused(cg))
		return cg;
	__u64 found = cg;
	for (int lvl = 1; lvl <= ALIAS_DEPTH; lvl++) {
		__u64 a = bpf_skb_ancestor_cgroup_id(skb, lvl);
		if (!a)
			break;
		__u64 *t = bpf_map_lookup_elem(&session_aliases, &a);
		if (t)
			found = *t;
	}
	return found;
}

/* The port rule of an allowed prefix (see struct port_rule_key). */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, MAX_CIDRS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct cidr_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} cidr_ports SEC(".maps");

/* The port rule of a learned address; absent: every port. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LEARNED);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct learned_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} learned_ports SEC(".maps");

/* The ports of a rule, per protocol: a bitmap, so a check is one lookup
 * and one bit test however many ranges the rule lists. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORT_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct port_rule_key);
	__type(value, struct port_bitmap);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} port_rules SEC(".maps");

/* Events of tasks whose session has no ring buffer (leftovers). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, GLOBAL_RINGBUF_SIZE);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} events SEC(".maps");

/* The original destination of sockets whose DNS traffic was redirected to
 * the session's resolver, for recvmsg and getpeername to restore. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct dns_orig);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} dns_origins SEC(".maps");


/* Set by the loader before loading: whether this kernel lets sock_create
 * programs call bpf_set_retval (Linux 5.18+). A constant to the verifier, so
 * on older kernels it prunes the call and the datapath still loads; a
 * refused MPTCP socket then gets EPERM like any other. */
volatile const __u8 have_set_retval = 0;

/* Force the event type and the enums of sluice.h into BTF for bpf2go -type
 * (they are otherwise only reached through ring buffer pointers, or as
 * constants), so that the Go side is generated from these definitions. */
const struct event *unused_event __attribute__((unused));
const struct unix_event *unused_unix_event __attribute__((unused));
const enum sluice_unix_verdict *unused_unix_verdict __attribute__((unused));
const enum sluice_port_kind *unused_port_kind __attribute__((unused));
const enum sluice_hook *unused_hook __attribute__((unused));
const enum sluice_reason *unused_reason __attribute__((unused));
const enum sluice_counter *unused_counter __attribute__((unused));
const enum sluice_session_flag *unused_session_flag __attribute__((unused));
const enum sluice_event_flag *unused_event_flag __attribute__((unused));
const struct name_event *unused_name_event __attribute__((unused));
const struct sni_key *unused_sni_key __attribute__((unused));

struct verdict {
	__u64 cgroup;
	__u32 ip[4]; /* network order, IPv4 as ::ffff:a.b.c.d */
	__u16 port;  /* host order */
	__u8 hook;
	__u8 reason;
	__u8 family;
	__u8 proto;
	__s32 arg0, arg1, arg2;
	__u8 learned; /* judge_addr allowed it as a learned address (verify.h) */
};

static __always_inline int is_v4mapped(const __u32 ip[4])
{
	return ip[0] == 0 && ip[1] == 0 && ip[2] == bpf_htonl(0xffff);
}

/* Loopback and the unspecified address (connect(0.0.0.0) reaches the local
 * host) never leave the machine. */
static __always_inline int is_local(const __u32 ip[4])
{
	if (is_v4mapped(ip)) {
		__u32 a = bpf_ntohl(ip[3]);
		return (a >> 24) == 127 || a == 0;
	}
	return ip[0] == 0 && ip[1] == 0 && ip[2] == 0 &&
	       (ip[3] == 0 || ip[3] == bpf_htonl(1));
}

static __always_inline void count(__u64 cg, enum sluice_counter which)
{
	struct counters *c = bpf_map_lookup_elem(&session_counters, &cg);
	if (c)
		c->n[which]++;
}

/* fill_event writes the verdict into an event record reserved on a ring
 * buffer: who (the current task), what and why. */
static __always_inline void fill_event(struct event *e, struct verdict *v, __u8 flags)
{
	__u64 pt = bpf_get_current_pid_tgid();
	e->ts = bpf_ktime_get_boot_ns();
	e->cgroup = v->cgroup;
	e->pid = pt >> 32;
	e->tid = (__u32)pt;
	e->uid = (__u32)bpf_get_current_uid_gid();
	e->hook = v->hook;
	e->reason = v->reason;
	e->flags = flags;
	e->family = v->family;
	e->port = v->port;
	e->proto = v->proto;
	e->pad = 0;
	__builtin_memcpy(e->addr, v->ip, 16);
	e->arg0 = v->arg0;
	e->arg1 = v->arg1;
	e->arg2 = v->arg2;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
}

/* reserve takes size bytes of the session's own ring buffer, or of the
 * machine's. */
static __always_inline void *reserve(__u64 cgroup, __u64 size)
{
	void *rb = bpf_map_lookup_elem(&session_events, &cgroup);
	if (rb)
		return bpf_ringbuf_reserve(rb, size, 0);
	return bpf_ringbuf_reserve(&events, size, 0);
}

static __always_inline void emit(struct verdict *v, __u8 flags)
{
	struct event *e = reserve(v->cgroup, sizeof(*e));
	if (!e) {
		count(v->cgroup, COUNTER_EVENTS_LOST);
		return;
	}
	fill_event(e, v, flags);
	bpf_ringbuf_submit(e, 0);
}

/* refuse reports a denial and returns the hook's verdict: 0 (EPERM), or 1
 * when the session is in audit mode. */
static __always_inline int refuse(struct verdict *v, struct session *s)
{
	if (s && (s->flags & SESSION_AUDIT)) {
		count(v->cgroup, COUNTER_AUDITED);
		emit(v, EVENT_AUDIT);
		return 1;
	}
	count(v->cgroup, COUNTER_DENIED);
	emit(v, 0);
	return 0;
}

/* port_in reports whether rule (0: every port) allows the verdict's
 * protocol and port. An unknown rule allows nothing: fail closed. */
static __always_inline int port_in(struct verdict *v, __u32 rule)
{
	if (!rule)
		return 1;
	struct port_rule_key k = {.session = v->cgroup, .rule = rule, .proto = v->proto};
	struct port_bitmap *b = bpf_map_lookup_elem(&port_rules, &k);
	if (!b)
		return 0;
	__u32 i = (v->port >> 6) & 1023;
	return (b->bits[i] >> (v->port & 63)) & 1;
}

/* judge_addr judges v for the session v->cgroup, whose entry is s
 * (session_of). */
static __always_inline int judge_addr(struct verdict *v, struct session *s)
{
	if (!s) {
		v->reason = REASON_NO_SESSION;
		return refuse(v, s);
	}
	__u32 port_rule = 0; /* of an allowed prefix whose ports refused v */

	struct cidr_key ck = {
		.prefixlen = 64 + 128,
		.session_lo = (__u32)v->cgroup,
		.session_hi = (__u32)(v->cgroup >> 32),
	};
	__builtin_memcpy(ck.addr, v->ip, 16);
	if (bpf_map_lookup_elem(&cidrs, &ck)) {
		if (!(s->flags & SESSION_PORT_RULES)) {
			count(v->cgroup, COUNTER_ALLOWED);
			return 1;
		}
		__u32 *r = bpf_map_lookup_elem(&cidr_ports, &ck);
		port_rule = r ? *r : 0xffffffff;
		if (r && port_in(v, *r)) {
			count(v->cgroup, COUNTER_ALLOWED);
			return 1;
		}
		/* The address may also have been learned for a name whose
		 * rule allows the port: each entry allows what it lists. */
	}

	struct learned_key lk = {.session = v->cgroup};
	__builtin_memcpy(lk.addr, v->ip, 16);
	struct learned_value *l = bpf_map_lookup_elem(&learned, &lk);
	if (l) {
		if (bpf_ktime_get_boot_ns() < l->expires) {
			if (!(s->flags & SESSION_PORT_RULES)) {
				v->learned = 1;
				count(v->cgroup, COUNTER_ALLOWED);
				return 1;
			}
			__u32 *r = bpf_map_lookup_elem(&learned_ports, &lk);
			if (!r || port_in(v, *r)) {
				v->learned = 1;
				count(v->cgroup, COUNTER_ALLOWED);
				return 1;
			}
			if (!port_rule)
				port_rule = *r;
		} else if (!port_rule) {
			v->reason = REASON_EXPIRED;
			return refuse(v, s);
		}
	}
	if (port_rule) {
		v->reason = REASON_PORT;
		v->arg0 = (__s32)port_rule;
		return refuse(v, s);
	}
	v->reason = REASON_NOT_ALLOWED;
	return refuse(v, s);
}

#define LOOPBACK4 0x7f000001

/* to_session_loopback points a connect/sendmsg at a listener of the session
 * on loopback (its resolver, its name verifier): 127.0.0.1:port4, or
 * ::1:port6 for a native IPv6 socket. A v4-mapped destination, or a
 * listener without an IPv6 port (IPv6 off), goes to ::ffff:127.0.0.1 so a
 * dual-stack socket still reaches the IPv4 listener. */
static __always_inline void to_session_loopback(struct bpf_sock_addr *ctx, int v6, int mapped, __u16 port4, __u16 port6)
{
	if (!v6) {
		ctx->user_ip4 = bpf_htonl(LOOPBACK4);
		ctx->user_port = port4;
	} else if (mapped || !port6) {
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = bpf_htonl(0xffff);
		ctx->user_ip6[3] = bpf_htonl(LOOPBACK4);
		ctx->user_port = port4;
	} else {
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = 0;
		ctx->user_ip6[3] = bpf_htonl(1);
		ctx->user_port = port6;
	}
}

/* ip_options_source_route reports whether IPv4 options (the len bytes of
 * buf) carry loose or strict source routing (0x83, 0x89, with or without
 * the copy bit). Malformed options count as source routing: the kernel
 * rejects them anyway, and refusing costs nothing. Indices are masked so the
 * verifier sees every read inside the 64-byte buffer. */
static __always_inline int ip_options_source_route(const __u8 *buf, __u64 len)
{
	__u64 i = 0, idx;

	for (int n = 0; n < 40; n++) {
		if (i >= len || i >= 40)
			break;
		idx = i;
		asm volatile("%0 &= 63" : "+r"(idx));
		__u8 t = buf[idx];
		if (t == 0)
			break;
		if (t == 1) {
			i++;
			continue;
		}
		if ((t & 0x7f) == 3 || (t & 0x7f) == 9)
			return 1;
		if (i + 1 >= len)
			return 1;
		idx = i + 1;
		asm volatile("%0 &= 63" : "+r"(idx));
		__u8 l = buf[idx];
		if (l < 2)
			return 1;
		i += l;
	}
	return 0;
}

#endif /* SLUICE_COMMON_H */
