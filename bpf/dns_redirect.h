// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

/* DNS redirection at connect/sendmsg time: port-53 traffic of a session
 * goes to its resolver (resolver path, auto while the resolver lives) or
 * to its upstream (kernel path, auto on failover); used by connect.c, and
 * by recvmsg.c to undo it. */

#ifndef SLUICE_DNS_REDIRECT_H
#define SLUICE_DNS_REDIRECT_H

#include "common.h"
#include "kdns.h"

/* resolver_alive reports whether the session's resolver holds the UDP
 * socket that redirect_dns would send this socket to (127.0.0.1 or ::1,
 * in the socket's network namespace), and still answers. The kernel
 * closes a process's sockets as it dies, so the lookup sees a kill -9 at
 * once and a restarted resolver as soon as it binds, with no expiry to
 * wait out. A resolver that holds its socket but has stopped answering
 * (SIGSTOP, a stuck loop) is seen by its beat: user space probes its own
 * resolver twice a second and moves the deadline in resolver_beats; past
 * it, the session fails over. It costs one socket hash lookup and one map
 * lookup per DNS connect/sendmsg of a failover session, never on other
 * connects. */
static __always_inline int resolver_alive(struct bpf_sock_addr *ctx, struct session *s, __u64 cg, int v6, int mapped)
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
	__u64 *until = bpf_map_lookup_elem(&resolver_beats, &cg);
	if (until && bpf_ktime_get_ns() > *until)
		return 0;
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
	if ((ks->flags & KDNS_FAILOVER) && resolver_alive(ctx, s, cg, v6, mapped))
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
	__u64 cg = session_cgroup();
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
	struct session *s;
	__u64 cg = session_of(&s);
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
	to_session_loopback(ctx, v6, mapped, s->dns_port4, s->dns_port6);
	return 1;
}

#endif /* SLUICE_DNS_REDIRECT_H */
