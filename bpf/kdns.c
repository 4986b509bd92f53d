// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* The kernel DNS path's two programs (kdns.h has the judges):
 * sluice_kdns_egress, reached by a tail call from sluice_egress (egress.c),
 * and sluice_kdns_ingress, attached to the cgroup of each session on the
 * kernel path (or auto). */

#include "common.h"
#include "kdns.h"

/* Reached from sluice_egress by a tail call (kdns_tail), for UDP packets. */
SEC("cgroup_skb/egress")
int sluice_kdns_egress(struct __sk_buff *skb)
{
	if (!kdns_socket(skb))
		return KDNS_PASS;
	return kdns_egress_judge(skb, bpf_skb_cgroup_id(skb), bpf_get_socket_cookie(skb));
}


SEC("cgroup_skb/ingress")
int sluice_kdns_ingress(struct __sk_buff *skb)
{
	const __u8 *data = (const __u8 *)(long)skb->data;
	const __u8 *end = (const __u8 *)(long)skb->data_end;

	/* It runs on every packet a session receives: what the first bytes
	 * show not to be UDP (a UDP socket receives nothing else) leaves at
	 * once, before the socket's lookup. */
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		if (data + 10 <= end && data[9] != IPPROTO_UDP)
			return 1;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		if (data + 7 <= end && data[6] == IPPROTO_TCP)
			return 1;
	}
	if (!kdns_socket(skb))
		return 1;
	return kdns_ingress_judge(skb, bpf_skb_cgroup_id(skb), bpf_get_socket_cookie(skb));
}
