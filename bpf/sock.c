// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* sock_create (only TCP and UDP sockets of AF_INET/AF_INET6) and
 * setsockopt (no source routing). */

#include "common.h"
#include "sni.h"
#include "verify.h"

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
		.cgroup = session_cgroup(),
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
/* sni_sockopt refuses what would put other bytes on the wire than the
 * kernel's TLS check read (sni.h): TCP_ULP (kTLS) on a socket whose name
 * is not judged yet, and TCP_FASTOPEN_CONNECT, which comes before connect
 * (so before the socket is known to be checked) and sends the first
 * flight in the SYN, in every session with a name check. */
static __always_inline int sni_sockopt(struct bpf_sockopt *ctx)
{
	struct bpf_sock *sk = ctx->sk;
	struct verdict v = {
		.hook = HOOK_SETSOCKOPT,
		.arg0 = ctx->level,
		.arg1 = ctx->optname,
		.arg2 = ctx->optlen,
	};
	if (ctx->optname == TCP_ULP_) {
		struct sni_state *st = sk && sni_marked_any() ? bpf_sk_storage_get(&sni_states, sk, 0, 0) : 0;
		if (!st || st->state == SNI_VERIFIED)
			return 1;
		v.cgroup = st->session;
		v.reason = REASON_ULP;
	} else {
		struct session *s;
		v.cgroup = session_of(&s);
		if (!bpf_map_lookup_elem(&verify_sessions, &v.cgroup))
			return 1;
		v.reason = REASON_FASTOPEN;
	}
	if (sk)
		v.family = sk->family;
	return refuse(&v, bpf_map_lookup_elem(&sessions, &v.cgroup));
}

SEC("cgroup/setsockopt")
int sluice_setsockopt(struct bpf_sockopt *ctx)
{
	int bad = 0;

	if (ctx->level == SOL_TCP_ && (ctx->optname == TCP_ULP_ || ctx->optname == TCP_FASTOPEN_CONNECT_)) {
		if (!sni_sockopt(ctx))
			return 0;
		return 1;
	}

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
		.cgroup = session_cgroup(),
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
