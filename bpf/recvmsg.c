// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* recvmsg4/6 and getpeername4/6: a redirected DNS socket sees the peer
 * it asked for, not the resolver or upstream it was sent to. */

#include "common.h"
#include "dns_redirect.h"
#include "verify.h"

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
	struct session *s;
	session_of(&s);
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
	if (verify_restore(ctx, 0))
		return 1;
	return restore_dns(ctx, 0);
}

SEC("cgroup/getpeername6")
int sluice_getpeername6(struct bpf_sock_addr *ctx)
{
	if (verify_restore(ctx, 1))
		return 1;
	return restore_dns(ctx, 1);
}
