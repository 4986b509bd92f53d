// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* Prototype (issue 18): judge the TLS SNI of a checked connection in the
 * kernel, on the client's own socket, instead of carrying the connection
 * through a user-space verifier. It is a self-contained object, loaded
 * only by the sniprobe package, not part of the datapath.
 *
 * connect4: a TCP connect to port 443 of a checked address (sp_addrs) marks
 * the socket pending in sp_state; the connection goes to the original
 * address unchanged.
 * sockops: when a pending socket is established, it is put in sp_socks, so
 * that sp_msg runs on its every sendmsg.
 * sk_msg: while pending, waits (cork) for the whole first TLS record, finds
 * the ClientHello's SNI and looks up (address, name) in sp_names: found ->
 * verified, passed; anything else -> refused, sendmsg fails with EACCES.
 * cgroup_skb egress: the backstop. A payload-bearing segment of a socket not
 * yet verified did not pass sp_msg (TCP Fast Open's SYN data and its
 * retransmits, a send that entered tcp_sendmsg before the socket joined
 * sp_socks), so it is dropped.
 * cgroup setsockopt: TCP_ULP and TCP_FASTOPEN_CONNECT are refused on a
 * checked socket's session; kTLS would put other bytes on the wire than the
 * ones sp_msg judged. */

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define SOCK_STREAM 1
#define SOL_TCP 6
#define TCP_ULP 31
#define TCP_FASTOPEN_CONNECT 30
#define SP_NAME 64
#define SP_MAX_RECORD (16384 + 5)

enum sp_state_v { SP_PENDING = 1, SP_VERIFIED = 2, SP_REFUSED = 3 };

enum sp_counter {
	SP_C_MARKED,
	SP_C_ALLOWED,
	SP_C_REFUSED,
	SP_C_EGRESS_DROP,
	SP_C_SOCKOPT_REFUSED,
	SP_C_CORKED,
	SP_C_UNHASHED,
	SP_C_TFO_REFUSED,
	SP_C_MAX,
};

struct sp_state {
	__u32 state;
	__u32 daddr;
	__u64 cookie; /* its key in sp_socks: sk_msg cannot read the cookie */
};

struct sp_name_key {
	__u32 daddr;
	char name[SP_NAME];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} sp_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct sp_name_key);
	__type(value, __u8);
} sp_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sp_state);
} sp_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} sp_socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SP_C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} sp_counters SEC(".maps");

/* The name sp_msg found last, for the tests to read (a prototype's event). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sp_name_key);
} sp_last SEC(".maps");

/* Set by the loader: keep a verified socket in sp_socks (1) or take it out
 * with the first ACK after its verdict (0, the default), which gives it back the kernel's own TCP
 * sendmsg and recvmsg: a socket in a sockhash reads through
 * tcp_bpf_recvmsg, which answers a wakeup without data with EAGAIN even on
 * a blocking socket. */
volatile const __u32 sp_keep = 0;

/* The kernel's tcp_sock, the one field read (CO-RE): sendto(MSG_FASTOPEN)
 * connects with fastopen_req set, the first flight already in it. */
struct tcp_sock {
	void *fastopen_req;
} __attribute__((preserve_access_index));

static __always_inline void count(__u32 c)
{
	__u64 *v = bpf_map_lookup_elem(&sp_counters, &c);
	if (v)
		__sync_fetch_and_add(v, 1);
}

SEC("cgroup/connect4")
int sp_connect4(struct bpf_sock_addr *ctx)
{
	if (ctx->type != SOCK_STREAM || ctx->user_port != bpf_htons(443))
		return 1;
	__u32 d = ctx->user_ip4;
	if (!bpf_map_lookup_elem(&sp_addrs, &d))
		return 1;
	struct bpf_sock *sk = ctx->sk;
	if (!sk)
		return 0;
	/* TCP Fast Open's SYN data and its retransmits never pass sk_msg:
	 * refused here with EPERM, before the SYN, rather than stalled by the
	 * egress backstop. */
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	if (tp && tp->fastopen_req) {
		count(SP_C_TFO_REFUSED);
		return 0;
	}
	struct sp_state *s = bpf_sk_storage_get(&sp_states, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!s)
		return 0; /* fail closed */
	s->state = SP_PENDING;
	s->daddr = d;
	count(SP_C_MARKED);
	return 1;
}

SEC("sockops")
int sp_sockops(struct bpf_sock_ops *skops)
{
	/* sk_msg may not take a socket out of its sockhash; sockops may. The
	 * RTT callback comes with the first ACK after the verdict. */
	if (skops->op == BPF_SOCK_OPS_RTT_CB) {
		struct bpf_sock *sk = skops->sk;
		if (!sk)
			return 1;
		struct sp_state *s = bpf_sk_storage_get(&sp_states, sk, 0, 0);
		if (!s || s->state != SP_VERIFIED)
			return 1;
		__u64 c = s->cookie;
		if (!bpf_map_delete_elem(&sp_socks, &c))
			count(SP_C_UNHASHED);
		bpf_sock_ops_cb_flags_set(skops, 0);
		return 1;
	}
	if (skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
		return 1;
	struct bpf_sock *sk = skops->sk;
	if (!sk)
		return 1;
	struct sp_state *s = bpf_sk_storage_get(&sp_states, sk, 0, 0);
	if (!s || s->state != SP_PENDING)
		return 1;
	__u64 c = bpf_get_socket_cookie(skops);
	s->cookie = c;
	/* A socket that cannot join sp_socks is never verified; the egress
	 * backstop then keeps its bytes off the wire. */
	bpf_sock_hash_update(skops, &sp_socks, &c, BPF_NOEXIST);
	if (!sp_keep)
		bpf_sock_ops_cb_flags_set(skops, BPF_SOCK_OPS_RTT_CB_FLAG);
	return 1;
}

static __always_inline int refuse(struct sp_state *s)
{
	s->state = SP_REFUSED;
	count(SP_C_REFUSED);
	return SK_DROP;
}

SEC("sk_msg")
int sp_msg(struct sk_msg_md *msg)
{
	struct sp_state *s = bpf_sk_storage_get(&sp_states, msg->sk, 0, 0);
	if (!s)
		return SK_PASS;
	if (s->state == SP_VERIFIED)
		return SK_PASS;
	if (s->state != SP_PENDING)
		return SK_DROP;
	__u32 size = msg->size;
	if (size < 5) {
		bpf_msg_cork_bytes(msg, 5);
		count(SP_C_CORKED);
		return SK_PASS;
	}
	if (bpf_msg_pull_data(msg, 0, 5, 0))
		return refuse(s);
	__u8 *d = msg->data, *end = msg->data_end;
	if (d + 5 > end)
		return refuse(s);
	if (d[0] != 0x16 || d[1] != 3)
		return refuse(s);
	__u32 rl = ((__u32)d[3] << 8) | d[4];
	if (rl < 4 || rl > 16384)
		return refuse(s);
	__u32 need = rl + 5;
	if (size < need) {
		bpf_msg_cork_bytes(msg, need);
		count(SP_C_CORKED);
		return SK_PASS;
	}
	if (bpf_msg_pull_data(msg, 0, need, 0))
		return refuse(s);
	d = msg->data;
	end = msg->data_end;
	if (d + 5 + 4 > end)
		return refuse(s);
	/* The handshake message must be a ClientHello wholly in this record. */
	if (d[5] != 1 || d[6] != 0)
		return refuse(s);
	__u32 hl = ((__u32)d[7] << 8) | d[8];
	if (hl + 4 > rl)
		return refuse(s);
	__u32 lim = 9 + hl; /* end of the ClientHello, from the record's start */
	__u32 off = 9 + 2 + 32;
	if (d + off + 1 > end)
		return refuse(s);
	off += 1 + d[off]; /* session id */
	off &= 0x7fff;
	if (d + off + 2 > end)
		return refuse(s);
	off += 2 + (((__u32)d[off] << 8) | d[off + 1]); /* cipher suites */
	off &= 0x7fff;
	if (d + off + 1 > end)
		return refuse(s);
	off += 1 + d[off]; /* compression */
	off &= 0x7fff;
	if (d + off + 2 > end)
		return refuse(s);
	__u32 xend = off + 2 + (((__u32)d[off] << 8) | d[off + 1]);
	if (xend > lim)
		return refuse(s);
	off += 2;
	for (int i = 0; i < 64; i++) {
		off &= 0x7fff;
		if (off + 4 > xend || d + off + 4 > end)
			return refuse(s); /* no SNI */
		__u32 t = ((__u32)d[off] << 8) | d[off + 1];
		__u32 l = ((__u32)d[off + 2] << 8) | d[off + 3];
		if (t != 0) {
			off += 4 + l;
			continue;
		}
		/* server_name: list length (2), type (1) = host_name, length (2). */
		off += 4;
		off &= 0x7fff;
		if (d + off + 5 > end || off + l > xend || l < 5)
			return refuse(s);
		if (d[off + 2] != 0)
			return refuse(s);
		__u32 nl = ((__u32)d[off + 3] << 8) | d[off + 4];
		if (nl == 0 || nl >= SP_NAME || nl + 5 > l)
			return refuse(s);
		off += 5;
		struct sp_name_key k = {.daddr = s->daddr};
		/* Unrolled: constant indices into the key. A loop's index, once
		 * the compiler folds j < SP_NAME - 1 into j < nl, has a bound the
		 * verifier does not know. */
#pragma unroll
		for (int j = 0; j < SP_NAME - 1; j++) {
			if (j < nl) {
				__u8 *p = d + ((off + j) & 0x7fff);
				if (p + 1 > end)
					return refuse(s);
				__u8 c = *p;
				if (c >= 'A' && c <= 'Z')
					c += 'a' - 'A';
				if (c == 0)
					return refuse(s);
				k.name[j] = c;
			}
		}
		__u32 z = 0;
		bpf_map_update_elem(&sp_last, &z, &k, BPF_ANY);
		if (!bpf_map_lookup_elem(&sp_names, &k))
			return refuse(s);
		s->state = SP_VERIFIED;
		count(SP_C_ALLOWED);
		return SK_PASS;
	}
	return refuse(s);
}

SEC("cgroup_skb/egress")
int sp_egress(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	if (!sk)
		return 1;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return 1;
	struct sp_state *s = bpf_sk_storage_get(&sp_states, sk, 0, 0);
	if (!s || s->state == SP_VERIFIED)
		return 1;
	__u8 ihl;
	if (bpf_skb_load_bytes(skb, 0, &ihl, 1))
		return 0;
	__u32 iph = (ihl & 0xf) * 4;
	__u8 doff;
	if (bpf_skb_load_bytes(skb, iph + 12, &doff, 1))
		return 0;
	__u32 hdr = iph + (doff >> 4) * 4;
	if (skb->len <= hdr)
		return 1; /* no payload: SYN, ACK, FIN, RST */
	count(SP_C_EGRESS_DROP);
	return 0;
}

SEC("cgroup/setsockopt")
int sp_setsockopt(struct bpf_sockopt *ctx)
{
	if (ctx->level == SOL_TCP && (ctx->optname == TCP_ULP || ctx->optname == TCP_FASTOPEN_CONNECT)) {
		struct bpf_sock *sk = ctx->sk;
		struct sp_state *s = sk ? bpf_sk_storage_get(&sp_states, sk, 0, 0) : 0;
		/* TCP_FASTOPEN_CONNECT comes before connect, so before the socket
		 * is known to be checked: refused for every socket of the cgroup.
		 * TCP_ULP only while not verified. */
		if (ctx->optname == TCP_FASTOPEN_CONNECT || (s && s->state != SP_VERIFIED)) {
			count(SP_C_SOCKOPT_REFUSED);
			return 0;
		}
	}
	if (ctx->optlen > 4096)
		ctx->optlen = -1; /* pass the kernel's own buffer on untouched */
	return 1;
}

char _license[] SEC("license") = "Dual BSD/GPL";
