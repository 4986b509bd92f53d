// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

/* The name check in the kernel (issues 18 and 30). A TCP connection to
 * any port of an address allowed only because the session learned it for
 * a name is judged by its first flight, on the client's own socket, and
 * then left to the kernel's own TCP: no proxy in the path (the user-space
 * verifier cost 0.6x of direct bulk throughput and +230 us per
 * connection; this costs about 1x and +20 us, docs/sniprobe.md). A CDN
 * routes by name on many ports (8443, 8080, 2053, ...), so every port is
 * read: a first flight that is a TLS ClientHello is judged by its SNI, one
 * that is an HTTP/1 request head by its Host. On a strict socket (ports
 * 80 and 443, every port of an entry with "verify": "name") anything else
 * is refused; on the other ports anything else passes unjudged (SSH, a
 * database's protocol, a server that speaks first), as it did before.
 *
 * connect4/6 (sni_mark): the socket is marked pending in its storage
 * (sni_states), the destination left as it is. A sendto(MSG_FASTOPEN),
 * whose data would be in the SYN, is refused with EPERM.
 * sockops (verify.c): once established, a pending socket joins sni_socks,
 * so that sluice_sni (sni.c, sk_msg) runs on its sendmsg; with the first
 * ACK after the verdict, a verified socket leaves it again (sk_msg may not
 * delete from a sockhash; sockops may), and is the kernel's own TCP from
 * then on. While pending, TCP_USER_TIMEOUT is at most SNI_USER_TIMEOUT_MS:
 * bytes that never passed sk_msg are dropped (below), so a connection
 * that holds them ends within that time instead of retransmitting them
 * for many minutes.
 * sk_msg: tells what the first flight is (sni.c, classify_http), corks
 * until the first TLS record (the request head) is whole, reads the
 * ClientHello in it (its Host) and looks its SNI up in sni_names (the
 * session's name entries, exact and wildcard: the user-space verifier's
 * rule). Allowed:
 * verified, passed. Anything else (another name, no SNI, an ECH
 * extension, not a whole ClientHello in one record, a name too long):
 * refused with a name_event, the send fails with EACCES and so does every
 * later one; in audit mode reported and passed.
 * egress (egress.c): a TCP segment with payload from a socket not yet
 * verified never passed sk_msg (a send that entered tcp_sendmsg before
 * the socket joined sni_socks) and is dropped; so is a segment with
 * urgent data (URG) until the first flight is acknowledged: a receiver
 * skips the urgent byte and would read another first flight than sk_msg
 * judged.
 * setsockopt (sock.c): TCP_ULP (kTLS, which would put other bytes on the
 * wire than sk_msg read) while not verified, and TCP_FASTOPEN_CONNECT in
 * a session with a name check (it comes before connect), are refused. */

#ifndef SLUICE_SNI_H
#define SLUICE_SNI_H

#include "common.h"

#define SOL_TCP_ 6
#define TCP_USER_TIMEOUT_ 18
#define TCP_FASTOPEN_CONNECT_ 30
#define TCP_ULP_ 31
#define SNI_USER_TIMEOUT_MS 10000
#define MAX_SNI_SOCKS (64 * 1024)

enum sni_state_v { SNI_PENDING = 1, SNI_VERIFIED = 2, SNI_REFUSED = 3 };

struct sni_state {
	__u64 session;
	__u64 cookie;  /* its key in sni_socks: sk_msg cannot read the cookie */
	__u32 ip[4];   /* network order, IPv4 as ::ffff:a.b.c.d */
	__u16 port;    /* host order */
	__u8 state;
	__u8 audit;    /* the session was in audit mode at connect */
	__u8 family;
	__u8 hashed;   /* in sni_socks */
	__u8 timeout;  /* TCP_USER_TIMEOUT lowered: user_timeout is the old value */
	__u8 http;     /* the first flight was taken for an HTTP request head (the event's hook) */
	__u8 strict;   /* neither TLS nor HTTP is refused (ports 80 and 443, "verify": "name") */
	__u32 user_timeout;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, MAX_SNI_NAMES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sni_key);
	__type(value, __u8);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sni_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sni_state);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sni_states SEC(".maps");

/* Pinned so that a datapath re-opened by another process keeps the sk_msg
 * program the load attached to it. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, MAX_SNI_SOCKS);
	__type(key, __u64);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sni_socks SEC(".maps");

/* 1 once a socket was marked on this machine: until then egress pays one
 * inlined array lookup per TCP segment for the backstop, no storage
 * lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sni_on SEC(".maps");

/* The open-coded number iterator (Linux 6.4): the verifier checks a
 * loop body once for every index, not once per index, which the scan of
 * an HTTP request head needs (a plain bounded loop over 1024 bytes took
 * more than the verifier's million instructions). Weak: on a kernel
 * without it the loader leaves them unresolved, http_check() is 0 and
 * port 80 goes to the verifier. */
struct bpf_iter_num {
	__u64 __opaque[1];
} __attribute__((aligned(8)));
extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __weak __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __weak __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __weak __ksym;

static __always_inline int http_check(void)
{
	return bpf_iter_num_new != 0;
}

/* The kernel's tcp_sock, the one field read (CO-RE): sendto(MSG_FASTOPEN)
 * connects with fastopen_req set, the first flight already in it. */
struct tcp_sock {
	void *fastopen_req;
} __attribute__((preserve_access_index));

static __always_inline int sni_marked_any(void)
{
	__u32 zero = 0;
	__u32 *on = bpf_map_lookup_elem(&sni_on, &zero);
	return on && *on;
}

/* sni_forget drops what an earlier connect of the socket left: a socket
 * connected again (after connect(AF_UNSPEC)) is judged afresh. */
static __always_inline void sni_forget(struct bpf_sock_addr *ctx)
{
	if (ctx->type == SOCK_STREAM && ctx->sk && sni_marked_any())
		bpf_sk_storage_delete(&sni_states, ctx->sk);
}

/* sni_mark marks a TCP connect to a learned address (after judge_addr
 * allowed it) for the kernel's name check, strict or not (above), and
 * returns the hook's verdict. */
static __always_inline int sni_mark(struct bpf_sock_addr *ctx, struct verdict *v, int strict)
{
	struct session *s = bpf_map_lookup_elem(&sessions, &v->cgroup);
	struct bpf_sock *sk = ctx->sk;
	if (!sk) {
		v->reason = REASON_VERIFY_UNAVAILABLE;
		return refuse(v, s);
	}
	/* TCP Fast Open's SYN data never passes sk_msg: refused here, before
	 * the SYN, rather than dropped by the egress backstop. */
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	if (tp && tp->fastopen_req) {
		v->reason = REASON_FASTOPEN;
		return refuse(v, s);
	}
	struct sni_state *st = bpf_sk_storage_get(&sni_states, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st) {
		v->reason = REASON_VERIFY_UNAVAILABLE;
		return refuse(v, s);
	}
	st->session = v->cgroup;
	st->cookie = 0;
	__builtin_memcpy(st->ip, v->ip, 16);
	st->port = v->port;
	st->state = SNI_PENDING;
	st->audit = s && (s->flags & SESSION_AUDIT);
	st->family = v->family;
	st->hashed = 0;
	st->timeout = 0;
	st->user_timeout = 0;
	st->http = v->port == 80;
	st->strict = strict;
	__u32 zero = 0, one = 1;
	__u32 *on = bpf_map_lookup_elem(&sni_on, &zero);
	if (on && !*on)
		bpf_map_update_elem(&sni_on, &zero, &one, BPF_ANY);
	return 1;
}

#endif /* SLUICE_SNI_H */
