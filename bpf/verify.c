// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* sockops: when the SYN of a connection redirected to the session's
 * verifier leaves, file its original destination under the loopback port
 * it connects from, the one thing of the client the verifier's accept can
 * see (verify.h). Every other socket costs one storage lookup per connect.
 *
 * sk_skb verdict: the in-kernel splice of a judged connection (verify.h,
 * verify_socks). */

#include "common.h"
#include "verify.h"

SEC("sockops")
int sluice_sockops(struct bpf_sock_ops *skops)
{
	if (skops->op != BPF_SOCK_OPS_TCP_CONNECT_CB)
		return 1;
	struct bpf_sock *sk = skops->sk;
	if (!sk)
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
