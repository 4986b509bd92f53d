// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* connect4/6 and sendmsg4/6 (unconnected UDP): judge the destination
 * against the session (loopback, CIDRs, learned IPs) and redirect DNS. */

#include "common.h"
#include "dns_redirect.h"
#include "verify.h"

/* loopback_session judges a loopback destination of a session in
 * loopback "session" mode: only ports its own processes bound and its
 * loopback_ports (its sluice listeners were allowed before). */
static __always_inline int loopback_session(struct bpf_sock_addr *ctx, struct verdict *v, __u8 hook, __u8 family, __u32 port)
{
	struct session *s;
	v->cgroup = session_of(&s);
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
	v->cgroup = session_cgroup();
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
	if (hook == HOOK_CONNECT4)
		sni_forget(ctx);
	if (ctx->user_port == bpf_htons(53) && redirect_dns(ctx, v.ip, 0))
		return 1;
	if (is_local(v.ip))
		return local_allowed(ctx, &v, hook, AF_INET);
	struct session *s;
	v.cgroup = session_of(&s);
	v.port = bpf_ntohs((__u16)ctx->user_port);
	v.hook = hook;
	v.family = AF_INET;
	v.proto = ctx->protocol;
	if (!judge_addr(&v, s))
		return 0;
	return v.learned ? verify_connect(ctx, &v, 0, hook == HOOK_CONNECT4) : 1;
}

static __always_inline int judge6(struct bpf_sock_addr *ctx, __u8 hook)
{
	struct verdict v = {
		.ip = {ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2],
		       ctx->user_ip6[3]},
	};
	if (hook == HOOK_CONNECT6)
		sni_forget(ctx);
	if (ctx->user_port == bpf_htons(53) && redirect_dns(ctx, v.ip, 1))
		return 1;
	if (is_local(v.ip))
		return local_allowed(ctx, &v, hook, is_v4mapped(v.ip) ? AF_INET : AF_INET6);
	struct session *s;
	v.cgroup = session_of(&s);
	v.port = bpf_ntohs((__u16)ctx->user_port);
	v.hook = hook;
	/* An IPv4-mapped destination reaches connect6 only: judge it by the
	 * IPv4 rules, which the shared ::ffff:0:0/96 key space does. */
	v.family = is_v4mapped(v.ip) ? AF_INET : AF_INET6;
	v.proto = ctx->protocol;
	if (!judge_addr(&v, s))
		return 0;
	return v.learned ? verify_connect(ctx, &v, 1, hook == HOOK_CONNECT6) : 1;
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
