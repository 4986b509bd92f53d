// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* cgroup_skb/egress of every session: source-routed packets are dropped;
 * UDP packets go on to the kernel DNS path's egress judge (kdns.c) by a
 * tail call. */

#include "common.h"
#include "kdns.h"
#include "sni.h"

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
	v.cgroup = skb_session_cgroup(skb);
	v.hook = HOOK_EGRESS;
	v.reason = REASON_SOURCE_ROUTE;
	/* Audit mode does not apply: this packet is already on its way to an
	 * address nobody judged, so it is always dropped. */
	count(v.cgroup, COUNTER_DENIED);
	emit(&v, 0);
	return 0;
}

/* The kernel DNS path's egress program (sluice_kdns_egress, in the kernel
 * DNS path's own object), reached by a tail call from sluice_egress for UDP
 * packets only. It is not attached to
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

/* egress_tcp is the kernel TLS check's backstop (sni.h): a segment with
 * payload of a socket whose name is not judged yet never passed sk_msg,
 * and is dropped; iph is the IP header's length. Until a socket was
 * marked on the machine, one array lookup. */
static __always_inline int egress_tcp(struct __sk_buff *skb, __u32 iph)
{
	if (!sni_marked_any())
		return 1;
	struct bpf_sock *sk = skb->sk;
	if (!sk)
		return 1;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return 1;
	struct sni_state *st = bpf_sk_storage_get(&sni_states, sk, 0, 0);
	if (!st)
		return 1;
	__u8 h[2]; /* data offset, flags */
	if (bpf_skb_load_bytes(skb, iph + 12, h, 2))
		return 0;
	/* Urgent data (MSG_OOB): a receiver without SO_OOBINLINE reads the
	 * stream without the urgent byte, so it would read another first
	 * flight than the one sk_msg judged (the record's last byte, the
	 * SNI's last character when server_name comes last, replaced by the
	 * next byte sent). Neither TLS nor HTTP has urgent data: dropped
	 * until the first flight is acknowledged (the socket then leaves
	 * sni_socks), so the connection fails within the pending socket's
	 * TCP_USER_TIMEOUT. */
	if ((h[1] & 0x20) && (st->state != SNI_VERIFIED || st->hashed))
		return 0;
	if (st->state == SNI_VERIFIED)
		return 1;
	if (skb->len <= iph + (h[0] >> 4) * 4)
		return 1; /* no payload: SYN, ACK, FIN, RST */
	return 0;
}

SEC("cgroup_skb/egress")
int sluice_egress(struct __sk_buff *skb)
{
	const __u8 *data = (const __u8 *)(long)skb->data;
	const __u8 *end = (const __u8 *)(long)skb->data_end;

	/* The common packet: recognised, and found not to be UDP (TCP: the
	 * name check's backstop), from the bytes read in place. */
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		if (data + 10 <= end && (data[0] & 0xf) == 5) {
			if (data[9] == IPPROTO_UDP)
				return egress_dns(skb);
			return data[9] == IPPROTO_TCP ? egress_tcp(skb, 20) : 1;
		}
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		if (data + 7 <= end && data[6] != NEXTHDR_HOP &&
		    data[6] != NEXTHDR_DEST && data[6] != NEXTHDR_ROUTING) {
			if (data[6] == IPPROTO_UDP)
				return egress_dns(skb);
			return data[6] == IPPROTO_TCP ? egress_tcp(skb, 40) : 1;
		}
	} else {
		return 1;
	}
	if (!egress_slow(skb))
		return 0;
	/* IPv4 with options (IP_OPTIONS needs no privilege): the backstop
	 * after them. IPv6 extension headers on TCP need CAP_NET_RAW
	 * (IPV6_HOPOPTS, IPV6_DSTOPTS), which sessions do not have. */
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		__u8 h[10];
		if (bpf_skb_load_bytes(skb, 0, h, 10))
			return 1;
		if (h[9] == IPPROTO_TCP)
			return egress_tcp(skb, (h[0] & 0xf) * 4);
	}
	return egress_dns(skb);
}
