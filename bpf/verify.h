// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

/* Name verification on learned addresses (issue 18). An address allowed
 * only because the session's resolver learned it for an allowed name is
 * shared, behind a CDN, with every other name of that CDN, which routes by
 * the TLS SNI and the HTTP Host. So a TCP connection to such an address on
 * a name-checked port is sent to the session's verifier on loopback, which
 * reads the client's first bytes, judges the name they carry and then
 * dials the original address itself and splices. The original destination
 * is kept in the socket's storage (verify_origins), as the DNS redirect
 * keeps port 53's; the sockops program (verify.c) files it under the
 * client's loopback port when the SYN leaves, which is the key the
 * verifier's accept can see; getpeername shows the original address.
 * That is the fallback now: every TCP port's TLS and HTTP is judged in
 * the kernel, on the client's own connection (sni.h), which is marked
 * here instead; the verifier takes port 80 and "verify": "name" ports on
 * a kernel without the number iterators (before 6.4).
 * UDP 443 (QUIC) to such an address is refused: its name is encrypted,
 * and clients fall back to TCP. An address judged by address (a CIDR or
 * IP entry; an entry with "verify": "address") is never redirected. */

#ifndef SLUICE_VERIFY_H
#define SLUICE_VERIFY_H

#include "common.h"
#include "sni.h"

#define IPPROTO_TCP_ 6

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SESSIONS);
	__type(key, __u64);
	__type(value, struct verify_session);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} verify_sessions SEC(".maps");

/* Learned addresses whose entry set "verify", keyed like learned; written
 * and removed with them by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LEARNED);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct learned_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} verify_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct verify_orig);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} verify_origins SEC(".maps");

/* An LRU: the verifier deletes what it accepted, and a connection that
 * never reached accept (its client died) must not fill the map; an entry
 * evicted early only makes its connection refused (fail closed). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, VERIFY_MAX_PENDING);
	__type(key, struct verify_key);
	__type(value, struct verify_orig);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} verify_pending SEC(".maps");

/* In-kernel splice of a judged connection (opt-in: on Linux 6.18 it
 * measured no faster than splice(2), docs/benchmarks.md). Once the verifier
 * allowed a connection (its first flight only peeked at, still queued), it
 * puts its two sockets
 * (the one it accepted from the client and the one it dialled) in
 * verify_socks, keyed by socket cookie, with each one's peer in
 * verify_peers; the sk_skb verdict program attached to verify_socks
 * (verify.c) then sends every byte either socket receives out of the
 * other one, without a copy through user space. bytes counts what was
 * redirected out of the peer, so that the verifier can tell when all of
 * it was written before it passes an end of stream on (redirected data
 * carries no FIN). An LRU: a verifier that died leaves entries that must
 * not fill the map; an entry evicted early leaves its bytes to the
 * verifier's user-space copy. */
#define VERIFY_MAX_SPLICED (64 * 1024)

struct verify_peer {
	__u64 peer;  /* socket cookie of the socket to send out of */
	__u64 bytes; /* bytes redirected to it */
};

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, VERIFY_MAX_SPLICED);
	__type(key, __u64);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} verify_socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, VERIFY_MAX_SPLICED);
	__type(key, __u64);
	__type(value, struct verify_peer);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} verify_peers SEC(".maps");

const enum sluice_verify_mode *unused_verify_mode __attribute__((unused));

/* verify_mode is how the learned address v->ip is judged beyond address:
 * 0 (the default rule), VERIFY_NAME or VERIFY_ADDRESS. */
static __always_inline __u8 verify_mode(struct verdict *v)
{
	struct learned_key k = {.session = v->cgroup};
	__builtin_memcpy(k.addr, v->ip, 16);
	__u8 *m = bpf_map_lookup_elem(&verify_addrs, &k);
	return m ? *m : 0;
}

/* verify_connect runs after judge_addr allowed a connect or sendmsg of a
 * session to a learned address (v->learned). It returns the hook's
 * verdict: 1 with the destination unchanged (judged by address), 1 with
 * the destination rewritten to the session's verifier, or a refusal. */
static __always_inline int verify_connect(struct bpf_sock_addr *ctx, struct verdict *v, int v6, int connect)
{
	struct verify_session *vs = bpf_map_lookup_elem(&verify_sessions, &v->cgroup);
	if (!vs || !vs->port4)
		return 1;
	if (ctx->type == SOCK_STREAM) {
		if (!connect || ctx->protocol != IPPROTO_TCP_)
			return 1; /* MPTCP is refused at socket(); TFO goes through connect */
		__u8 m = verify_mode(v);
		if (m == VERIFY_ADDRESS)
			return 1;
		int named = m == VERIFY_NAME || v->port == 80 || v->port == 443;
		/* Every port is judged in the kernel, on the client's own
		 * socket (sni.h): strictly on the named ones. Without the
		 * number iterators (before Linux 6.4) the kernel reads TLS
		 * only: port 443 is judged there, port 80 and "verify":
		 * "name" go to the verifier, and the other ports' TLS is
		 * judged in the kernel while their HTTP passes. */
		if (http_check() || v->port == 443 || !named)
			return sni_mark(ctx, v, named);
	} else {
		if (v->port != 443 || verify_mode(v) == VERIFY_ADDRESS)
			return 1;
		v->reason = REASON_QUIC;
		return refuse(v, bpf_map_lookup_elem(&sessions, &v->cgroup));
	}
	struct bpf_sock *sk = ctx->sk;
	struct verify_orig *o = 0;
	if (sk)
		o = bpf_sk_storage_get(&verify_origins, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!o) {
		v->reason = REASON_VERIFY_UNAVAILABLE;
		return refuse(v, bpf_map_lookup_elem(&sessions, &v->cgroup));
	}
	__builtin_memcpy(o->ip, v->ip, 16);
	o->port = bpf_htons(v->port);
	o->pad = 0;
	o->pid = bpf_get_current_pid_tgid() >> 32;
	o->cgroup = v->cgroup;
	bpf_get_current_comm(o->comm, sizeof(o->comm));
	to_session_loopback(ctx, v6, is_v4mapped(v->ip), vs->port4, vs->port6);
	return 1;
}

/* verify_restore makes getpeername of a connection the verifier carries
 * name the address the program connected to. Returns 1 when it did. */
static __always_inline int verify_restore(struct bpf_sock_addr *ctx, int v6)
{
	struct bpf_sock *sk = ctx->sk;
	if (!sk)
		return 0;
	struct verify_orig *o = bpf_sk_storage_get(&verify_origins, sk, 0, 0);
	if (!o)
		return 0;
	struct verify_session *vs = bpf_map_lookup_elem(&verify_sessions, &o->cgroup);
	if (!vs)
		return 0;
	__u32 port = ctx->user_port;
	if (!v6) {
		if (ctx->user_ip4 != bpf_htonl(LOOPBACK4) || port != vs->port4 || !is_v4mapped(o->ip))
			return 0;
		ctx->user_ip4 = o->ip[3];
	} else {
		__u32 a0 = ctx->user_ip6[0], a1 = ctx->user_ip6[1];
		__u32 a2 = ctx->user_ip6[2], a3 = ctx->user_ip6[3];
		int m4 = !a0 && !a1 && a2 == bpf_htonl(0xffff) && a3 == bpf_htonl(LOOPBACK4) && port == vs->port4;
		int m6 = !a0 && !a1 && !a2 && a3 == bpf_htonl(1) && port == vs->port6 && vs->port6;
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

#endif /* SLUICE_VERIFY_H */
