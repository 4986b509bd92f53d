// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* sockops: when the SYN of a connection redirected to the session's
 * verifier leaves, file its original destination under the loopback port
 * it connects from, the one thing of the client the verifier's accept can
 * see (verify.h). Every other socket costs one storage lookup per connect.
 * The kernel's TLS check (sni.h) takes its sockets' connect, established
 * and RTT callbacks.
 *
 * sk_skb verdict: the in-kernel splice of a judged connection (verify.h,
 * verify_socks). */

#include "common.h"
#include "verify.h"

/* sni_sockops is the kernel TLS check's part (sni.h): a pending socket's
 * user timeout is bounded while its SYN leaves, it joins sni_socks once
 * established, and leaves it with the first ACK after its verdict. */
static __always_inline void sni_sockops(struct bpf_sock_ops *skops, struct bpf_sock *sk)
{
	struct sni_state *st = bpf_sk_storage_get(&sni_states, sk, 0, 0);
	if (!st)
		return;
	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB: {
		if (st->state != SNI_PENDING)
			return;
		int old = 0, bound = SNI_USER_TIMEOUT_MS;
		if (bpf_getsockopt(skops, SOL_TCP_, TCP_USER_TIMEOUT_, &old, sizeof(old)))
			return;
		if (old > 0 && old <= bound)
			return;
		if (!bpf_setsockopt(skops, SOL_TCP_, TCP_USER_TIMEOUT_, &bound, sizeof(bound))) {
			st->timeout = 1;
			st->user_timeout = old;
		}
		return;
	}
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB: {
		if (st->state != SNI_PENDING)
			return;
		__u64 c = bpf_get_socket_cookie(skops);
		st->cookie = c;
		/* A socket that cannot join sni_socks is never verified: the
		 * egress backstop keeps its bytes off the wire. */
		if (!bpf_sock_hash_update(skops, &sni_socks, &c, BPF_NOEXIST))
			st->hashed = 1;
		bpf_sock_ops_cb_flags_set(skops, BPF_SOCK_OPS_RTT_CB_FLAG);
		return;
	}
	case BPF_SOCK_OPS_RTT_CB: {
		if (st->state != SNI_VERIFIED)
			return;
		if (st->hashed) {
			__u64 c = st->cookie;
			bpf_map_delete_elem(&sni_socks, &c);
			st->hashed = 0;
		}
		if (st->timeout) {
			int old = st->user_timeout;
			bpf_setsockopt(skops, SOL_TCP_, TCP_USER_TIMEOUT_, &old, sizeof(old));
			st->timeout = 0;
		}
		bpf_sock_ops_cb_flags_set(skops, 0);
		return;
	}
	}
}

SEC("sockops")
int sluice_sockops(struct bpf_sock_ops *skops)
{
	__u32 op = skops->op;
	if (op != BPF_SOCK_OPS_TCP_CONNECT_CB && op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB && op != BPF_SOCK_OPS_RTT_CB)
		return 1;
	struct bpf_sock *sk = skops->sk;
	if (!sk)
		return 1;
	if (sni_marked_any())
		sni_sockops(skops, sk);
	if (op != BPF_SOCK_OPS_TCP_CONNECT_CB)
		return 1;
	struct verify_orig *o = bpf_sk_storage_get(&verify_origins, sk, 0, 0);
	if (!o)
		return 1;
	struct verify_key k = {.session = o->cgroup, .port = skops->local_port};
	/* Every address field is read before the family is looked at: the
	 * compiler otherwise selects between two context offsets and loads
	 * through the sum, a modified context pointer the verifier refuses. */
	__u32 ip4 = skops->local_ip4;
	__u32 a[4] = {skops->local_ip6[0], skops->local_ip6[1], skops->local_ip6[2], skops->local_ip6[3]};
	asm volatile("" ::: "memory");
	if (skops->family == AF_INET) {
		a[0] = 0;
		a[1] = 0;
		a[2] = bpf_htonl(0xffff);
		a[3] = ip4;
	}
	__builtin_memcpy(k.addr, a, 16);
	bpf_map_update_elem(&verify_pending, &k, o, BPF_ANY);
	return 1;
}

/* Runs for every skb a socket in verify_socks receives: out of its peer,
 * or, without one (its entry evicted, its socket not in the map or closed),
 * into its own queue for the verifier to copy. */
SEC("sk_skb/verdict")
int sluice_verify_splice(struct __sk_buff *skb)
{
	/* The FIN comes as an empty skb: redirected, it breaks the peer's
	 * pipe (the kernel takes sending nothing for an error). The end of
	 * stream is the verifier's to pass on. */
	if (!skb->len)
		return SK_DROP;
	__u64 c = bpf_get_socket_cookie(skb);
	struct verify_peer *p = bpf_map_lookup_elem(&verify_peers, &c);
	if (!p)
		return SK_PASS;
	__u32 len = skb->len;
	/* A peer not in the map (yet, or any more) leaves the bytes to the
	 * verifier's copy, rather than dropping them. */
	if (bpf_sk_redirect_hash(skb, &verify_socks, &p->peer, 0) != SK_PASS)
		return SK_PASS;
	__sync_fetch_and_add(&p->bytes, len);
	return SK_PASS;
}
