// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* sluice datapath: cgroup hooks that let a session's processes reach only
 * loopback, the session's CIDRs and the IPs its DNS resolver learned.
 *
 * All programs attach once, to the sluice parent cgroup; a session is found
 * by the cgroup id of the calling task. A task in the sluice hierarchy with
 * no session entry is treated as a session with an empty policy: the
 * datapath fails closed. Allowed connects produce no event (an event per
 * connect measured +70% on this machine kind), only per-CPU counters. */

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

#include "kdns.h"

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

struct verdict {
	__u64 cgroup;
	__u32 ip[4]; /* network order, IPv4 as ::ffff:a.b.c.d */
	__u16 port;  /* host order */
	__u8 hook;
	__u8 reason;
	__u8 family;
	__u8 proto;
	__s32 arg0, arg1, arg2;
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

static __always_inline void emit(struct verdict *v, __u8 flags)
{
	struct event *e;
	void *rb = bpf_map_lookup_elem(&session_events, &v->cgroup);

	if (rb)
		e = bpf_ringbuf_reserve(rb, sizeof(*e), 0);
	else
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(v->cgroup, COUNTER_EVENTS_LOST);
		return;
	}
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

static __always_inline int judge_addr(struct verdict *v)
{
	struct session *s = bpf_map_lookup_elem(&sessions, &v->cgroup);
	if (!s) {
		v->reason = REASON_NO_SESSION;
		return refuse(v, s);
	}

	struct cidr_key ck = {
		.prefixlen = 64 + 128,
		.session_lo = (__u32)v->cgroup,
		.session_hi = (__u32)(v->cgroup >> 32),
	};
	__builtin_memcpy(ck.addr, v->ip, 16);
	if (bpf_map_lookup_elem(&cidrs, &ck)) {
		count(v->cgroup, COUNTER_ALLOWED);
		return 1;
	}

	struct learned_key lk = {.session = v->cgroup};
	__builtin_memcpy(lk.addr, v->ip, 16);
	struct learned_value *l = bpf_map_lookup_elem(&learned, &lk);
	if (l) {
		if (bpf_ktime_get_boot_ns() < l->expires) {
			count(v->cgroup, COUNTER_ALLOWED);
			return 1;
		}
		v->reason = REASON_EXPIRED;
		return refuse(v, s);
	}
	v->reason = REASON_NOT_ALLOWED;
	return refuse(v, s);
}

#define LOOPBACK4 0x7f000001

/* resolver_alive reports whether the session's resolver holds the UDP
 * socket that redirect_dns would send this socket to (127.0.0.1 or ::1,
 * in the socket's network namespace). The kernel closes a process's
 * sockets as it dies, so the lookup sees a kill -9 at once and a
 * restarted resolver as soon as it binds, with no expiry to wait out and
 * nothing user space must keep refreshing. It costs one socket hash
 * lookup per DNS connect/sendmsg of a failover session, never on other
 * connects. */
static __always_inline int resolver_alive(struct bpf_sock_addr *ctx, struct session *s, int v6, int mapped)
{
	struct bpf_sock_tuple t = {};
	struct bpf_sock *sk;

	if (!v6 || mapped || !s->dns_port6) {
		/* A mapped or v6 socket without a ::1 resolver reaches the
		 * IPv4 one (redirect_dns); the lookup follows it there. */
		t.ipv4.daddr = bpf_htonl(LOOPBACK4);
		t.ipv4.dport = s->dns_port4;
		sk = bpf_sk_lookup_udp(ctx, &t, sizeof(t.ipv4), BPF_F_CURRENT_NETNS, 0);
	} else {
		t.ipv6.daddr[3] = bpf_htonl(1);
		t.ipv6.dport = s->dns_port6;
		sk = bpf_sk_lookup_udp(ctx, &t, sizeof(t.ipv6), BPF_F_CURRENT_NETNS, 0);
	}
	if (!sk)
		return 0;
	bpf_sk_release(sk);
	return 1;
}

/* kdns_redirect points a UDP DNS socket of a session on the kernel path
 * at the session's upstream (see kdns.h). Returns 0 when the session has
 * none for this family, or when it is a failover session whose resolver
 * is alive: the socket goes to the session's resolver. */
static __always_inline int kdns_redirect(struct bpf_sock_addr *ctx, struct session *s, __u64 cg, int v6, int mapped)
{
	struct kdns_session *ks = bpf_map_lookup_elem(&kdns_sessions, &cg);

	if (!ks || !(ks->flags & KDNS_ON))
		return 0;
	if ((ks->flags & KDNS_FAILOVER) && resolver_alive(ctx, s, v6, mapped))
		return 0;
	if (!v6) {
		if (!ks->up4)
			return 0;
		ctx->user_ip4 = ks->up4;
		ctx->user_port = ks->port4;
		return 1;
	}
	if (mapped) {
		if (!ks->up4)
			return 0;
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = bpf_htonl(0xffff);
		ctx->user_ip6[3] = ks->up4;
		ctx->user_port = ks->port4;
		return 1;
	}
	/* A native IPv6 server needs an IPv6 upstream: sendmsg6 cannot
	 * rewrite to a v4-mapped address (ENOTSUPP), so without one the
	 * socket goes to the resolver on ::1. */
	if (!(ks->up6[0] | ks->up6[1] | ks->up6[2] | ks->up6[3]))
		return 0;
	ctx->user_ip6[0] = ks->up6[0];
	ctx->user_ip6[1] = ks->up6[1];
	ctx->user_ip6[2] = ks->up6[2];
	ctx->user_ip6[3] = ks->up6[3];
	ctx->user_port = ks->port6;
	return 1;
}

/* kdns_restore makes an answer of the session's upstream on a redirected
 * socket look as if the server the program asked sent it. */
static __always_inline int kdns_restore(struct bpf_sock_addr *ctx, int v6)
{
	struct bpf_sock *sk = ctx->sk;
	if (!sk)
		return 0;
	struct dns_orig *o = bpf_sk_storage_get(&dns_origins, sk, 0, 0);
	if (!o || o->pad != 1)
		return 0;
	__u64 cg = bpf_get_current_cgroup_id();
	struct kdns_session *ks = bpf_map_lookup_elem(&kdns_sessions, &cg);
	if (!ks)
		return 0;
	__u32 port = ctx->user_port;
	if (!v6) {
		if (ctx->user_ip4 != ks->up4 || port != ks->port4 || !is_v4mapped(o->ip))
			return 0;
		ctx->user_ip4 = o->ip[3];
	} else {
		__u32 a0 = ctx->user_ip6[0], a1 = ctx->user_ip6[1];
		__u32 a2 = ctx->user_ip6[2], a3 = ctx->user_ip6[3];
		int m4 = !a0 && !a1 && a2 == bpf_htonl(0xffff) && a3 == ks->up4 && port == ks->port4;
		int m6 = a0 == ks->up6[0] && a1 == ks->up6[1] && a2 == ks->up6[2] && a3 == ks->up6[3] &&
			 port == ks->port6;
		if (!m4 && !m6)
			return 0;
		ctx->user_ip6[0] = o->ip[0];
		ctx->user_ip6[1] = o->ip[1];
		ctx->user_ip6[2] = o->ip[2];
		ctx->user_ip6[3] = o->ip[3];
	}
	ctx->user_port = o->port;
	return 1;
}

/* redirect_dns sends port-53 traffic of a session with a resolver to that
 * resolver, whatever server the program asked for (resolv.conf, 8.8.8.8,
 * 127.0.0.53), and remembers the original for recvmsg and getpeername.
 * Returns 1 when it rewrote the address. */
static __always_inline int redirect_dns(struct bpf_sock_addr *ctx, const __u32 ip[4], int v6)
{
	__u64 cg = bpf_get_current_cgroup_id();
	struct session *s = bpf_map_lookup_elem(&sessions, &cg);
	int mapped = is_v4mapped(ip);

	if (!s || !s->dns_port4)
		return 0;
	struct bpf_sock *sk = ctx->sk;
	if (!sk)
		return 0;
	struct dns_orig *o = bpf_sk_storage_get(&dns_origins, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!o)
		return 0; /* judged normally: fails closed unless allowed */
	__builtin_memcpy(o->ip, ip, 16);
	o->port = bpf_htons(53);
	o->pad = 0;
	if (ctx->type == SOCK_DGRAM && kdns_redirect(ctx, s, cg, v6, mapped)) {
		o->pad = 1;
		return 1;
	}
	if (!v6) {
		ctx->user_ip4 = bpf_htonl(LOOPBACK4);
		ctx->user_port = s->dns_port4;
	} else if (mapped || !s->dns_port6) {
		/* Without a resolver on ::1 (IPv6 off), a dual-stack socket
		 * still reaches the IPv4 one through the mapped address. */
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = bpf_htonl(0xffff);
		ctx->user_ip6[3] = bpf_htonl(LOOPBACK4);
		ctx->user_port = s->dns_port4;
	} else {
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = 0;
		ctx->user_ip6[3] = bpf_htonl(1);
		ctx->user_port = s->dns_port6;
	}
	return 1;
}

/* loopback_session judges a loopback destination of a session in
 * loopback "session" mode: only ports its own processes bound and its
 * loopback_ports (its sluice listeners were allowed before). */
static __always_inline int loopback_session(struct bpf_sock_addr *ctx, struct verdict *v, __u8 hook, __u8 family, __u32 port)
{
	v->cgroup = bpf_get_current_cgroup_id();
	struct session *s = bpf_map_lookup_elem(&sessions, &v->cgroup);
	if (!s || !(s->flags & SESSION_LOOPBACK_SESSION))
		return 1;
	struct port_key k = {.session = v->cgroup, .port = port};
	if (bpf_map_lookup_elem(&loopback_ports, &k))
		return 1;
	v->port = port;
	v->hook = hook;
	v->family = family;
	v->proto = ctx->protocol;
	v->reason = REASON_LOOPBACK_PORT;
	return refuse(v, s);
}

/* loopback_open: while no session on the machine is in loopback "session"
 * mode, one inlined array lookup. */
static __always_inline int loopback_open(struct bpf_sock_addr *ctx, struct verdict *v, __u8 hook, __u8 family, __u32 port)
{
	__u32 zero = 0;
	__u32 *strict = bpf_map_lookup_elem(&loopback_strict, &zero);

	if (!strict || !*strict)
		return 1;
	return loopback_session(ctx, v, hook, family, port);
}

/* local_allowed: loopback is open, except another session's sluice
 * listeners, and in loopback "session" mode what the session did not
 * create or list. */
static __always_inline int local_allowed(struct bpf_sock_addr *ctx, struct verdict *v, __u8 hook, __u8 family)
{
	__u32 port = bpf_ntohs((__u16)ctx->user_port);
	__u64 *owner = bpf_map_lookup_elem(&listeners, &port);

	if (!owner || !*owner)
		return loopback_open(ctx, v, hook, family, port);
	v->cgroup = bpf_get_current_cgroup_id();
	if (*owner == v->cgroup)
		return 1;
	v->port = port;
	v->hook = hook;
	v->family = family;
	v->proto = ctx->protocol;
	v->reason = REASON_FOREIGN_LISTENER;
	return refuse(v, bpf_map_lookup_elem(&sessions, &v->cgroup));
}

static __always_inline int judge4(struct bpf_sock_addr *ctx, __u8 hook)
{
	struct verdict v = {
		.ip = {0, 0, bpf_htonl(0xffff), ctx->user_ip4},
	};
	if (ctx->user_port == bpf_htons(53) && redirect_dns(ctx, v.ip, 0))
		return 1;
	if (is_local(v.ip))
		return local_allowed(ctx, &v, hook, AF_INET);
	v.cgroup = bpf_get_current_cgroup_id();
	v.port = bpf_ntohs((__u16)ctx->user_port);
	v.hook = hook;
	v.family = AF_INET;
	v.proto = ctx->protocol;
	return judge_addr(&v);
}

static __always_inline int judge6(struct bpf_sock_addr *ctx, __u8 hook)
{
	struct verdict v = {
		.ip = {ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2],
		       ctx->user_ip6[3]},
	};
	if (ctx->user_port == bpf_htons(53) && redirect_dns(ctx, v.ip, 1))
		return 1;
	if (is_local(v.ip))
		return local_allowed(ctx, &v, hook, is_v4mapped(v.ip) ? AF_INET : AF_INET6);
	v.cgroup = bpf_get_current_cgroup_id();
	v.port = bpf_ntohs((__u16)ctx->user_port);
	v.hook = hook;
	/* An IPv4-mapped destination reaches connect6 only: judge it by the
	 * IPv4 rules, which the shared ::ffff:0:0/96 key space does. */
	v.family = is_v4mapped(v.ip) ? AF_INET : AF_INET6;
	v.proto = ctx->protocol;
	return judge_addr(&v);
}

SEC("cgroup/connect4")
int sluice_connect4(struct bpf_sock_addr *ctx)
{
	return judge4(ctx, HOOK_CONNECT4);
}

SEC("cgroup/connect6")
int sluice_connect6(struct bpf_sock_addr *ctx)
{
	return judge6(ctx, HOOK_CONNECT6);
}

SEC("cgroup/sendmsg4")
int sluice_sendmsg4(struct bpf_sock_addr *ctx)
{
	return judge4(ctx, HOOK_SENDMSG4);
}

SEC("cgroup/sendmsg6")
int sluice_sendmsg6(struct bpf_sock_addr *ctx)
{
	return judge6(ctx, HOOK_SENDMSG6);
}

/* restore_dns makes a reply from the session's resolver look as if it came
 * from the server the program asked (recvmsg), and a connected socket's
 * peer the server it connected to (getpeername). */
static __always_inline int restore_dns(struct bpf_sock_addr *ctx, int v6)
{
	__u32 port = ctx->user_port;
	int v4src;

	if (kdns_restore(ctx, v6))
		return 1;

	if (!v6) {
		if (ctx->user_ip4 != bpf_htonl(LOOPBACK4))
			return 1;
		v4src = 1;
	} else {
		__u32 a0 = ctx->user_ip6[0], a1 = ctx->user_ip6[1];
		__u32 a2 = ctx->user_ip6[2], a3 = ctx->user_ip6[3];
		if (a0 || a1)
			return 1;
		if (a2 == bpf_htonl(0xffff) && a3 == bpf_htonl(LOOPBACK4))
			v4src = 1;
		else if (a2 == 0 && a3 == bpf_htonl(1))
			v4src = 0;
		else
			return 1;
	}
	__u64 cg = bpf_get_current_cgroup_id();
	struct session *s = bpf_map_lookup_elem(&sessions, &cg);
	if (!s)
		return 1;
	if (port != (v4src ? s->dns_port4 : s->dns_port6))
		return 1;
	struct bpf_sock *sk = ctx->sk;
	if (!sk)
		return 1;
	struct dns_orig *o = bpf_sk_storage_get(&dns_origins, sk, 0, 0);
	if (!o)
		return 1;
	if (!v6) {
		if (!is_v4mapped(o->ip))
			return 1;
		ctx->user_ip4 = o->ip[3];
	} else {
		ctx->user_ip6[0] = o->ip[0];
		ctx->user_ip6[1] = o->ip[1];
		ctx->user_ip6[2] = o->ip[2];
		ctx->user_ip6[3] = o->ip[3];
	}
	ctx->user_port = o->port;
	return 1;
}

SEC("cgroup/recvmsg4")
int sluice_recvmsg4(struct bpf_sock_addr *ctx)
{
	return restore_dns(ctx, 0);
}

SEC("cgroup/recvmsg6")
int sluice_recvmsg6(struct bpf_sock_addr *ctx)
{
	return restore_dns(ctx, 1);
}

SEC("cgroup/getpeername4")
int sluice_getpeername4(struct bpf_sock_addr *ctx)
{
	return restore_dns(ctx, 0);
}

SEC("cgroup/getpeername6")
int sluice_getpeername6(struct bpf_sock_addr *ctx)
{
	return restore_dns(ctx, 1);
}

/* Only TCP and UDP: ICMP ping sockets, SCTP, MPTCP (whose subflows the
 * kernel opens to peer-announced addresses), UDP-Lite and raw sockets are
 * refused at creation.
 *
 * An MPTCP socket is refused with EPROTONOSUPPORT rather than EPERM (where
 * the kernel lets this program set the error: have_set_retval): "this
 * protocol is not available here" is the truth for the session, and it is
 * the answer on which programs that try MPTCP first fall back to TCP and stop
 * trying (Go >= 1.24 listeners probe MPTCP once per process and, on EPERM,
 * would try it again, and be refused again, at every Listen). */
SEC("cgroup/sock_create")
int sluice_sock_create(struct bpf_sock *sk)
{
	__u32 type = sk->type, proto = sk->protocol;

	if ((type == SOCK_STREAM && proto == IPPROTO_TCP) ||
	    (type == SOCK_DGRAM && proto == IPPROTO_UDP))
		return 1;

	struct verdict v = {
		.cgroup = bpf_get_current_cgroup_id(),
		.hook = HOOK_SOCK_CREATE,
		.reason = REASON_SOCKET_TYPE,
		.family = sk->family,
		/* event.proto is a byte: MPTCP (262) would read as TCP (6).
		 * arg2 carries the whole number. */
		.proto = proto <= 0xff ? proto : 0,
		.arg0 = sk->family,
		.arg1 = type,
		.arg2 = proto,
	};
	int verdict = refuse(&v, bpf_map_lookup_elem(&sessions, &v.cgroup));
	if (!verdict && proto == IPPROTO_MPTCP && have_set_retval)
		bpf_set_retval(-EPROTONOSUPPORT);
	return verdict;
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

/* Source routing sends the packet to the first hop named in the option,
 * an address the connect hook never saw: refuse to set it.
 *
 * This hook runs on every setsockopt of a session. Most of what it costs is
 * the kernel's, around the program: a copy of the option value and the
 * socket lock (measured on Linux 6.18: about 40% of a TCP_NODELAY call,
 * the program itself about 3%). Setting optlen to 0 on the way out (use the
 * caller's buffer instead of a kernel copy) was measured too: the option's
 * handler then copies from user memory, which costs what the kmalloc and
 * memcpy it saves did, so the handler keeps the copy this program saw. */
SEC("cgroup/setsockopt")
int sluice_setsockopt(struct bpf_sockopt *ctx)
{
	int bad = 0;

	if (ctx->level == SOL_IPV6 &&
	    (ctx->optname == IPV6_RTHDR || ctx->optname == IPV6_2292RTHDR ||
	     ctx->optname == IPV6_2292PKTOPTIONS)) {
		bad = ctx->optlen > 0;
	} else if (ctx->level == SOL_IP && ctx->optname == IP_OPTIONS &&
		   ctx->optlen > 0) {
		__u8 buf[64] = {};
		const __u8 *p = ctx->optval, *end = ctx->optval_end;
		__u64 len = 0;
		for (int i = 0; i < 40; i++) {
			if (p + i + 1 > end)
				break;
			buf[i] = p[i];
			len++;
		}
		bad = ip_options_source_route(buf, len);
	}
	if (!bad)
		return 1;

	struct verdict v = {
		.cgroup = bpf_get_current_cgroup_id(),
		.hook = HOOK_SETSOCKOPT,
		.reason = REASON_SOURCE_ROUTE,
		.arg0 = ctx->level,
		.arg1 = ctx->optname,
		.arg2 = ctx->optlen,
	};
	if (ctx->sk)
		v.family = ctx->sk->family;
	return refuse(&v, bpf_map_lookup_elem(&sessions, &v.cgroup));
}

/* The setsockopt hook cannot see per-packet control messages (IPV6_RTHDR or
 * IP_RETOPTS cmsgs on sendmsg), so source-routed packets are also dropped on
 * egress. This runs for every packet a session sends: the common packet (an
 * IPv4 header without options, an IPv6 header followed by no hop-by-hop,
 * destination or routing header) is recognised from one or two bytes read
 * in place; only the rest is copied out and parsed (egress_slow). */
static __always_inline int egress_slow(struct __sk_buff *skb)
{
	int bad = 0;
	struct verdict v = {};

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		__u8 hdr[20], opts[64] = {};
		if (bpf_skb_load_bytes(skb, 0, hdr, 20))
			return 1;
		__u64 optlen = ((hdr[0] & 0xf) * 4);
		if (optlen <= 20)
			return 1;
		optlen -= 20;
		if (optlen > 40)
			optlen = 40;
		if (bpf_skb_load_bytes(skb, 20, opts, optlen))
			return 1;
		bad = ip_options_source_route(opts, optlen);
		if (!bad)
			return 1;
		v.family = AF_INET;
		v.proto = hdr[9];
		v.ip[2] = bpf_htonl(0xffff);
		__builtin_memcpy(&v.ip[3], hdr + 16, 4);
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		__u8 hdr[40];
		if (bpf_skb_load_bytes(skb, 0, hdr, 40))
			return 1;
		__u8 nh = hdr[6];
		__u32 off = 40;
		if (nh == NEXTHDR_HOP || nh == NEXTHDR_DEST) {
			__u8 ext[2];
			if (bpf_skb_load_bytes(skb, 40, ext, 2))
				return 1;
			nh = ext[0];
			off += (ext[1] + 1) * 8;
		}
		if (nh != NEXTHDR_ROUTING)
			return 1;
		/* Report the transport protocol, found after the routing header. */
		__u8 rh[1] = {};
		bpf_skb_load_bytes(skb, off, rh, 1);
		v.family = AF_INET6;
		v.proto = rh[0];
		__builtin_memcpy(v.ip, hdr + 24, 16);
	} else {
		return 1;
	}

	/* The socket's cgroup, not current's: egress may run in softirq. */
	v.cgroup = bpf_skb_cgroup_id(skb);
	v.hook = HOOK_EGRESS;
	v.reason = REASON_SOURCE_ROUTE;
	/* Audit mode does not apply: this packet is already on its way to an
	 * address nobody judged, so it is always dropped. */
	count(v.cgroup, COUNTER_DENIED);
	emit(&v, 0);
	return 0;
}

/* The kernel DNS path's egress program (sluice_kdns_egress), reached by a
 * tail call from sluice_egress for UDP packets only. It is not attached to
 * the sessions' cgroups as a program of its own: a cgroup_skb program costs
 * its call on every packet (a TCP connect+close cycle pays it on each of its
 * packets), and sluice_egress runs on every packet anyway. The slot is
 * empty where the kernel refuses the program (sessions then never take the
 * kernel path). Pinned: a pin holds the array's entries, which the kernel
 * would clear with the last user reference otherwise. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} kdns_tail SEC(".maps");

/* egress_dns hands a UDP packet to the kernel DNS path's egress program. */
static __always_inline int egress_dns(struct __sk_buff *skb)
{
	bpf_tail_call(skb, &kdns_tail, 0);
	/* No program in the slot: a socket pointed at the upstream must not
	 * send what nobody judged (fails closed); the rest passes. */
	return kdns_socket(skb) ? KDNS_DROP_QUIET : 1;
}

SEC("cgroup_skb/egress")
int sluice_egress(struct __sk_buff *skb)
{
	const __u8 *data = (const __u8 *)(long)skb->data;
	const __u8 *end = (const __u8 *)(long)skb->data_end;

	/* The common packet: recognised, and found not to be UDP (TCP: done),
	 * from the bytes read in place. */
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		if (data + 10 <= end && (data[0] & 0xf) == 5)
			return data[9] == IPPROTO_UDP ? egress_dns(skb) : 1;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		if (data + 7 <= end && data[6] != NEXTHDR_HOP &&
		    data[6] != NEXTHDR_DEST && data[6] != NEXTHDR_ROUTING)
			return data[6] == IPPROTO_UDP ? egress_dns(skb) : 1;
	} else {
		return 1;
	}
	if (!egress_slow(skb))
		return 0;
	return egress_dns(skb);
}

/* ---- loopback "session" mode: listeners created inside the session ---- */

/* record_bind remembers a port bound by a process of a session in
 * loopback "session" mode, so the session may reach its own listeners.
 * post_bind sees the port the kernel chose for a bind to port 0. */
static __always_inline int record_bind(struct bpf_sock *sk)
{
	__u32 zero = 0;
	__u32 *strict = bpf_map_lookup_elem(&loopback_strict, &zero);

	if (!strict || !*strict)
		return 1;
	__u64 cg = bpf_get_current_cgroup_id();
	struct session *s = bpf_map_lookup_elem(&sessions, &cg);
	if (!s || !(s->flags & SESSION_LOOPBACK_SESSION))
		return 1;
	struct port_key k = {.session = cg, .port = sk->src_port};
	__u8 val = PORT_BOUND;
	/* A full map leaves the port unrecorded: connects to it are then
	 * refused and explained (fail closed). */
	bpf_map_update_elem(&loopback_ports, &k, &val, BPF_NOEXIST);
	return 1;
}

SEC("cgroup/post_bind4")
int sluice_post_bind4(struct bpf_sock *sk)
{
	return record_bind(sk);
}

SEC("cgroup/post_bind6")
int sluice_post_bind6(struct bpf_sock *sk)
{
	return record_bind(sk);
}

/* ---- unix sockets: cgroup connect_unix and sendmsg_unix ----
 *
 * A session's connect() of a unix socket and its sendmsg() to a named
 * datagram peer are judged by the name it passes (a path, or an abstract
 * name), before the kernel resolves it: these hooks see nothing else.
 * Allowed: names in unix_allowed (exact, one hash lookup), any abstract
 * name when the session's Landlock scope judges those (SESSION_OWN_ABSTRACT),
 * and names matched by one of the session's globs or below one of its
 * prefixes (unix_globs, tried only when the exact lookup missed; a prefix
 * is the session's own socket directory, a tmpfs only the session can
 * populate, where symlinks are not followed). See loader/unix_linux.go for what that can and cannot
 * hold against (a name is not an inode). */

#define UNIX_GLOBS_MAX 16
#define GLOB_STEPS 4096

/* A session's glob: '*' matches a run of characters other than '/'. */
struct unix_glob_key {
	__u64 session;
	__u32 index;
	__u32 pad;
};

struct unix_glob {
	__u32 len;
	__u32 flags; /* GLOB_PREFIX */
	char pat[128];
};

/* A prefix entry (the session's own socket directory, "/dir/"): any clean
 * name below it, at any depth. */
#define GLOB_PREFIX 1

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SESSIONS * 4);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct unix_glob_key);
	__type(value, struct unix_glob);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} unix_globs SEC(".maps");

/* Per-CPU scratch for the slow path (the key and a glob do not fit the
 * 512-byte stack together). */
struct unix_scratch {
	struct unix_key k;
	char text[128];   /* the path again, with room for masked indexes */
	char pat[128];
	__u32 tlen, plen;
	__s32 i, j, star_i, star_j;
	__s32 result; /* 1 match, 0 no match, -1 undecided */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unix_scratch);
} unix_scratch SEC(".maps");

struct bpf_sock_addr_kern {
	void *sk;
	void *uaddr;
	__u64 tmp_reg;
	void *t_ctx;
	__u32 uaddrlen;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* unix_name fills k with the name the caller passed. Returns 0 or -1. */
static __always_inline int unix_name(struct bpf_sock_addr *ctx, struct unix_key *k)
{
	struct bpf_sock_addr_kern *sa = bpf_cast_to_kern_ctx(ctx);
	__u32 alen = sa->uaddrlen;
	const char *p = (const char *)sa->uaddr + 2; /* sun_path */
	char first = 0;

	if (alen <= 2 || bpf_probe_read_kernel(&first, 1, p))
		return -1;
	__u32 n = alen - 2;
	if (first == 0) {
		n -= 1; /* the leading NUL */
		if (n > UNIX_PATH_MAX - 1)
			n = UNIX_PATH_MAX - 1;
		if (n && bpf_probe_read_kernel(k->path, n, p + 1))
			return -1;
		k->abstract = 1;
		k->len = n;
		return 0;
	}
	if (n > UNIX_PATH_MAX)
		n = UNIX_PATH_MAX;
	/* Copies up to the first NUL, at most n bytes, and terminates. */
	long r = bpf_probe_read_kernel_str(k->path, n + 1, p);
	if (r <= 0)
		return -1;
	k->len = r - 1;
	return 0;
}

/* bpf_loop's context must live on the stack: it carries the scratch. */
struct loop_ctx {
	struct unix_scratch *c;
};

/* One step of a wildcard match of text against pat, '*' never matching
 * '/': the classic matcher that remembers the last star. */
static long glob_step(__u64 idx, struct loop_ctx *lc)
{
	struct unix_scratch *c = lc->c;
	__s32 i = c->i, j = c->j;
	__u32 ti = i & 127, pj = j & 127;

	if ((__u32)i >= c->tlen) {
		/* Text consumed: the rest of the pattern must be stars. */
		if ((__u32)j >= c->plen) {
			c->result = 1;
			return 1;
		}
		if (c->pat[pj] == '*') {
			c->j = j + 1;
			return 0;
		}
		c->result = 0;
		return 1;
	}
	if ((__u32)j < c->plen && c->pat[pj] == '*') {
		c->star_j = j;
		c->star_i = i;
		c->j = j + 1;
		return 0;
	}
	if ((__u32)j < c->plen && c->pat[pj] == c->text[ti]) {
		c->i = i + 1;
		c->j = j + 1;
		return 0;
	}
	if (c->star_j >= 0 && c->text[c->star_i & 127] != '/') {
		c->star_i++;
		c->i = c->star_i;
		c->j = c->star_j + 1;
		return 0;
	}
	c->result = 0;
	return 1;
}

/* Any "", "." or ".." component makes a path unfit for glob matching (a
 * glob entry never has one; '*' must not stand for them). */
static long clean_step(__u64 idx, struct loop_ctx *lc)
{
	struct unix_scratch *c = lc->c;
	__u32 i = idx & 127;

	if (idx >= c->tlen) {
		c->result = 1;
		return 1;
	}
	if (c->text[i] != '/')
		return 0;
	char a = c->text[(i + 1) & 127], b = c->text[(i + 2) & 127], d = c->text[(i + 3) & 127];
	if (a == '/' || a == 0 || (a == '.' && (b == '/' || b == 0)) ||
	    (a == '.' && b == '.' && (d == '/' || d == 0))) {
		c->result = 0;
		return 1;
	}
	return 0;
}

/* One byte of a prefix comparison of text against pat. */
static long prefix_step(__u64 idx, struct loop_ctx *lc)
{
	struct unix_scratch *c = lc->c;
	__u32 i = idx & 127;

	if (idx >= c->plen) {
		c->result = 1;
		return 1;
	}
	if (c->pat[i] != c->text[i]) {
		c->result = 0;
		return 1;
	}
	return 0;
}

/* unix_glob_match tries the session's globs against c->k (pathnames only). */
static __always_inline int unix_glob_match(struct unix_scratch *c, __u64 cg)
{
	if (c->k.abstract || c->k.len == 0 || c->k.path[0] != '/')
		return 0;
	c->tlen = c->k.len;
	__builtin_memcpy(c->text, c->k.path, sizeof(c->k.path));
	__builtin_memset(c->text + sizeof(c->k.path), 0, sizeof(c->text) - sizeof(c->k.path));
	struct loop_ctx lc = {.c = c};
	c->result = -1;
	bpf_loop(UNIX_PATH_MAX, clean_step, &lc, 0);
	if (c->result != 1)
		return 0;
	for (__u32 g = 0; g < UNIX_GLOBS_MAX; g++) {
		struct unix_glob_key gk = {.session = cg, .index = g};
		struct unix_glob *gl = bpf_map_lookup_elem(&unix_globs, &gk);
		if (!gl)
			return 0;
		__builtin_memcpy(c->pat, gl->pat, sizeof(c->pat));
		c->plen = gl->len;
		c->result = -1;
		if (gl->flags & GLOB_PREFIX) {
			/* Below the directory, not the directory itself. */
			if (c->tlen > c->plen)
				bpf_loop(UNIX_PATH_MAX, prefix_step, &lc, 0);
			if (c->result == 1)
				return 1;
			continue;
		}
		c->i = c->j = 0;
		c->star_i = c->star_j = -1;
		bpf_loop(GLOB_STEPS, glob_step, &lc, 0);
		if (c->result == 1)
			return 1;
	}
	return 0;
}

static __always_inline void emit_unix(__u64 cg, __u8 hook, __u8 flags, struct unix_key *k)
{
	struct unix_event *e;
	void *rb = bpf_map_lookup_elem(&session_events, &cg);

	if (rb)
		e = bpf_ringbuf_reserve(rb, sizeof(*e), 0);
	else
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(cg, COUNTER_EVENTS_LOST);
		return;
	}
	__u64 pt = bpf_get_current_pid_tgid();
	__builtin_memset(&e->e, 0, sizeof(e->e));
	e->e.ts = bpf_ktime_get_boot_ns();
	e->e.cgroup = cg;
	e->e.pid = pt >> 32;
	e->e.tid = (__u32)pt;
	e->e.uid = (__u32)bpf_get_current_uid_gid();
	e->e.hook = hook;
	e->e.reason = REASON_NOT_ALLOWED;
	e->e.flags = flags;
	e->e.family = 1; /* AF_UNIX */
	bpf_get_current_comm(e->e.comm, sizeof(e->e.comm));
	e->abstract = k->abstract;
	e->pad[0] = e->pad[1] = e->pad[2] = 0;
	e->len = k->len;
	__builtin_memcpy(e->path, k->path, sizeof(e->path));
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int judge_unix(struct bpf_sock_addr *ctx, __u8 hook)
{
	__u64 cg = bpf_get_current_cgroup_id();
	struct session *s = bpf_map_lookup_elem(&sessions, &cg);
	__u32 zero = 0;
	struct unix_scratch *c = bpf_map_lookup_elem(&unix_scratch, &zero);

	if (!c)
		return 0;
	__builtin_memset(&c->k, 0, sizeof(c->k));
	c->k.session = cg;
	if (unix_name(ctx, &c->k))
		return 0; /* an address that cannot be read is refused */
	__u8 *v = s ? bpf_map_lookup_elem(&unix_allowed, &c->k) : 0;
	if (v && *v == UNIX_ALLOWED)
		return 1;
	if (v && *v == UNIX_QUIET) {
		/* Expected and harmless: the caller falls back to files and
		 * DNS. An event per lookup would bury the real refusals, and
		 * so would a count among them. */
		count(cg, COUNTER_QUIET);
		return (s->flags & SESSION_AUDIT) ? 1 : 0;
	}
	/* The session's Landlock domain has the abstract-socket scope: the
	 * kernel lets it reach only abstract sockets made inside the domain
	 * and refuses the rest itself, after this hook, when it finds the
	 * peer. User space is told (EVENT_SCOPED) and explains the refusal
	 * when the name belongs to no socket of the session. */
	if (s && c->k.abstract && (s->flags & SESSION_OWN_ABSTRACT)) {
		emit_unix(cg, hook, EVENT_SCOPED, &c->k);
		return 1;
	}
	if (s && unix_glob_match(c, cg))
		return 1;
	if (s && (s->flags & SESSION_AUDIT)) {
		count(cg, COUNTER_AUDITED);
		emit_unix(cg, hook, EVENT_AUDIT, &c->k);
		return 1;
	}
	count(cg, COUNTER_DENIED);
	emit_unix(cg, hook, 0, &c->k);
	return 0;
}

SEC("cgroup/connect_unix")
int sluice_connect_unix(struct bpf_sock_addr *ctx)
{
	return judge_unix(ctx, HOOK_UNIX_CONNECT);
}

SEC("cgroup/sendmsg_unix")
int sluice_sendmsg_unix(struct bpf_sock_addr *ctx)
{
	return judge_unix(ctx, HOOK_UNIX_SEND);
}
