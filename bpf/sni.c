// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* sk_msg of sni_socks: the name check of a TCP connection to a learned
 * address (sni.h), on its first flight: TLS by its SNI, HTTP/1 by its
 * Host. */

#include "common.h"
#include "sni.h"

#define TLS_EXT_SNI 0
#define TLS_EXT_ECH 0xfe0d
#define TLS_MAX_RECORD 16384

/* sni_refuse reports the refusal of st's connection for reason (with the
 * name read, reversed, for REASON_SNI) and returns the verdict: refused,
 * or passed in audit mode. */
static __always_inline int sni_refuse(struct sni_state *st, __u8 reason, struct sni_key *k, __u32 len)
{
	struct verdict v = {
		.cgroup = st->session,
		.port = st->port,
		.hook = st->http ? HOOK_HTTP : HOOK_TLS,
		.reason = reason,
		.family = st->family,
		.proto = IPPROTO_TCP,
	};
	__builtin_memcpy(v.ip, st->ip, 16);
	__u8 flags = 0;
	if (st->audit) {
		st->state = SNI_VERIFIED;
		flags = EVENT_AUDIT;
	} else {
		st->state = SNI_REFUSED;
	}
	count(v.cgroup, COUNTER_NAME_CHECKED);
	count(v.cgroup, COUNTER_NAME_REFUSED);
	struct name_event *e = reserve(v.cgroup, sizeof(*e));
	if (e) {
		fill_event(&e->e, &v, flags);
		e->len = 0;
		e->pad = 0;
		if (k && len <= SNI_NAME_MAX) {
			e->len = len;
			__builtin_memcpy(e->name, k->data + 8, SNI_NAME_MAX);
		} else {
			__builtin_memset(e->name, 0, SNI_NAME_MAX);
		}
		bpf_ringbuf_submit(e, 0);
	} else {
		count(v.cgroup, COUNTER_EVENTS_LOST);
	}
	return st->audit ? SK_PASS : SK_DROP;
}

/* sni_judge looks the name up, reversed in k, for st's session; its
 * verdict. */
static __always_inline int sni_judge(struct sni_state *st, struct sni_key *k, __u32 nl)
{
	if (!bpf_map_lookup_elem(&sni_names, k))
		return sni_refuse(st, REASON_SNI, k, nl);
	st->state = SNI_VERIFIED;
	count(st->session, COUNTER_NAME_CHECKED);
	return SK_PASS;
}

#define HTTP_HEAD_MAX 4096
#define HTTP_MASK (HTTP_HEAD_MAX - 1)

/* cork_more holds the message (sends none of it) until it has n bytes,
 * when it is judged again, whole. */
static __always_inline int cork_more(struct sk_msg_md *msg, __u32 n)
{
	bpf_msg_cork_bytes(msg, n);
	return SK_PASS;
}

static __always_inline __u8 lower(__u8 c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* tchar: a byte of an HTTP token (RFC 9110 5.6.2), which a method is. */
static __always_inline int tchar(__u8 c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	switch (c) {
	case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
	case '-': case '.': case '^': case '_': case '`': case '|': case '~':
		return 1;
	}
	return 0;
}

enum flight_class { FLIGHT_MORE = 0, FLIGHT_HTTP = 1, FLIGHT_OTHER = 2, FLIGHT_LONG = 3 };

/* classify_http tells whether the first n bytes at d (not TLS) may be an
 * HTTP/1 request head. A server reads one as: empty lines it skips (RFC
 * 9112 2.2), a method (a token), white space, a target, white space and
 * a version, "HTTP/" whatever the case; so bytes whose first line has a
 * token, white space and "HTTP/" before its line feed are taken for
 * HTTP (FLIGHT_HTTP, judged strictly: judge_http), and so is, refused,
 * such a line not ended within HTTP_HEAD_MAX bytes (FLIGHT_LONG: no
 * telling what a server with a longer limit reads). Bytes that cannot
 * be the start of a request line (no token first, a token not followed
 * by white space, a NUL or a line ended without "HTTP/": SSH's banner,
 * SMTP's EHLO, Redis, a database's binary start) are FLIGHT_OTHER; a
 * prefix of a request line is FLIGHT_MORE (held for the rest). *s is the
 * request line's first byte, *m the method's end. */
static __always_inline int classify_http(__u8 *d, __u8 *end, __u32 size, __u32 *s, __u32 *m)
{
	__u32 phase = 0, res = FLIGHT_MORE;
	struct bpf_iter_num it;
	int *ip;
	bpf_iter_num_new(&it, 0, HTTP_HEAD_MAX);
	while ((ip = bpf_iter_num_next(&it))) {
		__u32 i = *ip;
		__u8 *p = d + (i & HTTP_MASK);
		if (p + 1 > end)
			break;
		__u8 c = *p;
		if (phase == 0) {
			if (c == '\r' || c == '\n')
				continue;
			if (!tchar(c)) {
				res = FLIGHT_OTHER;
				break;
			}
			*s = i;
			phase = 1;
			continue;
		}
		if (phase == 1) {
			if (tchar(c))
				continue;
			if (c != ' ' && c != '\t') {
				res = FLIGHT_OTHER;
				break;
			}
			*m = i;
			phase = 2;
			continue;
		}
		if (c == '\n' || c == 0) {
			res = FLIGHT_OTHER;
			break;
		}
		if (p + 5 > end)
			continue;
		if (lower(p[0]) == 'h' && lower(p[1]) == 't' && lower(p[2]) == 't' && lower(p[3]) == 'p' && p[4] == '/') {
			res = FLIGHT_HTTP;
			break;
		}
	}
	bpf_iter_num_destroy(&it);
	if (res == FLIGHT_MORE && size >= HTTP_HEAD_MAX)
		res = phase == 1 ? FLIGHT_OTHER : FLIGHT_LONG;
	return res;
}

/* judge_http judges the first request head of a connection, which
 * classify_http took for HTTP: its request line starts at s, its method
 * ends at m. Its one Host header is judged, as the verifier does, by
 * stricter rules where the verifier's would cost a parser: the head must
 * be whole within HTTP_HEAD_MAX bytes, the empty lines before it each a
 * CRLF, its method a token and one space (not CONNECT, whose target is
 * an authority; not HTTP/2's PRI, whose version is not 1.x), its target
 * must be origin-form or "*" (an absolute-form target, which servers
 * take over Host, is refused rather than compared), its lines must end
 * in CRLF (a lone CR or LF, which some servers take as a line's end and
 * others not, is refused: the two could read different Host headers),
 * and no line may be folded. */
static __always_inline int judge_http(struct sk_msg_md *msg, struct sni_state *st, __u8 *d, __u8 *end, __u32 s, __u32 m)
{
	__u32 size = msg->size;
	st->http = 1;
	/* The method: a token and one space; the target's first byte. */
	__u32 t = m + 1;
	if (m <= s || s & 1)
		return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
	__u8 *mp = d + (m & HTTP_MASK);
	if (mp + 2 > end)
		return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
	if (mp[0] != ' ' || (mp[1] != '/' && mp[1] != '*'))
		return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
	/* The head's end (CRLF CRLF), every line's end a CRLF, no fold. The
	 * loops only look; what they find is judged after them. */
	__u32 hend = 0, crlf = 0, bad = 0, i;
	struct bpf_iter_num it;
	int *ip;
	bpf_iter_num_new(&it, 0, HTTP_HEAD_MAX);
	while ((ip = bpf_iter_num_next(&it))) {
		i = *ip;
		__u8 *p = d + (i & HTTP_MASK);
		if (i < s) {
			/* An empty line before the request: CRLF. */
			if (p + 1 > end || p[0] != ((i & 1) ? '\n' : '\r')) {
				bad = 1;
				break;
			}
			continue;
		}
		if (p + 2 > end)
			break;
		if ((p[0] == '\r') != (p[1] == '\n')) {
			bad = 1;
			break;
		}
		if (p[0] != '\r')
			continue;
		if (!crlf)
			crlf = i; /* the request line's end */
		if (p + 4 > end)
			break;
		if (p[2] == ' ' || p[2] == '\t') {
			bad = 1;
			break;
		}
		if (p[2] == '\r' && p[3] == '\n') {
			hend = i;
			break;
		}
	}
	bpf_iter_num_destroy(&it);
	if (bad)
		return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
	if (!hend) {
		if (size >= HTTP_HEAD_MAX)
			return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
		/* Wait for more of the head. */
		return cork_more(msg, size + 1);
	}
	/* The request line ends in " HTTP/1.0" or " HTTP/1.1". */
	if (crlf < t + 9)
		return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
	__u8 *v = d + ((crlf - 9) & HTTP_MASK);
	if (v + 9 > end)
		return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
	if (v[0] != ' ' || v[1] != 'H' || v[2] != 'T' || v[3] != 'T' || v[4] != 'P' || v[5] != '/' || v[6] != '1' ||
	    v[7] != '.' || (v[8] != '0' && v[8] != '1'))
		return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
	/* The Host header: exactly one, "\r\nhost:" in any case, no white
	 * space before its colon. */
	__u32 host = 0, hosts = 0;
	bpf_iter_num_new(&it, 0, HTTP_HEAD_MAX);
	while ((ip = bpf_iter_num_next(&it))) {
		i = *ip;
		if (i < crlf)
			continue;
		if (i >= hend)
			break;
		__u8 *p = d + (i & HTTP_MASK);
		if (p + 7 > end)
			break;
		if (p[0] != '\r' || lower(p[2]) != 'h' || lower(p[3]) != 'o' || lower(p[4]) != 's' || lower(p[5]) != 't')
			continue;
		if (p[6] == ' ' || p[6] == '\t') {
			bad = 1;
			break;
		}
		if (p[6] != ':')
			continue;
		hosts++;
		if (hosts > 1)
			break;
		host = i + 7;
	}
	bpf_iter_num_destroy(&it);
	if (bad)
		return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
	if (hosts > 1)
		return sni_refuse(st, REASON_HOSTS, 0, 0);
	if (!hosts)
		return sni_refuse(st, REASON_NO_HOST, 0, 0);
	/* Its value: white space around it, a port and a final dot off. */
	__u32 vs = host, ve = 0, colon = 0;
	bpf_iter_num_new(&it, 0, 256);
	while ((ip = bpf_iter_num_next(&it))) {
		__u32 j = host + *ip;
		__u8 *p = d + (j & HTTP_MASK);
		if (p + 1 > end) {
			bad = 1;
			break;
		}
		__u8 c = *p;
		if (c == '\r') {
			ve = j;
			break;
		}
		if (vs == j && (c == ' ' || c == '\t'))
			vs = j + 1;
		else if (c == ':' && !colon)
			colon = j;
		else if (c == ':' || c == '[') {
			bad = 1; /* an IPv6 literal, or worse */
			break;
		}
	}
	bpf_iter_num_destroy(&it);
	if (bad)
		return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
	if (!ve)
		return sni_refuse(st, REASON_SNI_LONG, 0, 0);
	if (colon)
		ve = colon;
#pragma clang loop unroll(disable)
	for (i = 0; i < 8; i++) {
		if (ve <= vs)
			break;
		__u8 *p = d + ((ve - 1) & HTTP_MASK);
		if (p + 1 > end || (*p != ' ' && *p != '\t'))
			break;
		ve--;
	}
	if (ve > vs) {
		__u8 *p = d + ((ve - 1) & HTTP_MASK);
		if (p + 1 > end)
			return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
		if (*p == '.')
			ve--;
	}
	if (ve <= vs)
		return sni_refuse(st, REASON_NO_HOST, 0, 0);
	__u32 nl = ve - vs;
	if (nl >= SNI_NAME_MAX)
		return sni_refuse(st, REASON_SNI_LONG, 0, 0);
	struct sni_key k = {.prefixlen = (8 + SNI_NAME_MAX) * 8};
	__builtin_memcpy(k.data, &st->session, 8);
	bpf_iter_num_new(&it, 0, SNI_NAME_MAX - 1);
	while ((ip = bpf_iter_num_next(&it))) {
		__u32 j = *ip;
		if (j >= nl)
			break;
		__u8 *p = d + ((vs + nl - 1 - j) & HTTP_MASK);
		if (p + 1 > end) {
			bad = 1;
			break;
		}
		__u8 c = lower(*p);
		if (c == 0 || c == ' ' || c == '\t') {
			bad = 1;
			break;
		}
		k.data[8 + (j & (SNI_NAME_MAX - 1))] = c;
	}
	bpf_iter_num_destroy(&it);
	if (bad)
		return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
	return sni_judge(st, &k, nl);
}

/* judge_tls judges a first flight that starts as a TLS record does: the
 * SNI of the ClientHello in its first record. */
static __always_inline int judge_tls(struct sk_msg_md *msg, struct sni_state *st)
{
	__u32 size = msg->size;
	st->http = 0;
	if (size < 5) {
		bpf_msg_cork_bytes(msg, 5);
		return SK_PASS;
	}
	if (bpf_msg_pull_data(msg, 0, 5, 0))
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	__u8 *d = msg->data, *end = msg->data_end;
	if (d + 5 > end)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	if (d[0] != 0x16 || d[1] != 3)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	__u32 rl = ((__u32)d[3] << 8) | d[4];
	if (rl < 4 || rl > TLS_MAX_RECORD)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	__u32 need = rl + 5;
	if (size < need) {
		/* The whole record first: a ClientHello is judged whole. */
		bpf_msg_cork_bytes(msg, need);
		return SK_PASS;
	}
	if (bpf_msg_pull_data(msg, 0, need, 0))
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	d = msg->data;
	end = msg->data_end;
	if (d + 5 + 4 > end)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	/* The handshake message must be a ClientHello wholly in this record
	 * (real clients send it in one; one split across records is not
	 * read, so refused). */
	if (d[5] != 1 || d[6] != 0)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	__u32 hl = ((__u32)d[7] << 8) | d[8];
	if (hl + 4 > rl)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	__u32 lim = 9 + hl; /* the ClientHello's end, from the record's start */
	__u32 off = 9 + 2 + 32;
	if (d + off + 1 > end)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	off += 1 + d[off]; /* session id */
	off &= 0x7fff;
	if (d + off + 2 > end)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	off += 2 + (((__u32)d[off] << 8) | d[off + 1]); /* cipher suites */
	off &= 0x7fff;
	if (d + off + 1 > end)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	off += 1 + d[off]; /* compression methods */
	off &= 0x7fff;
	if (d + off + 2 > end)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	__u32 xend = off + 2 + (((__u32)d[off] << 8) | d[off + 1]);
	if (xend > lim)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	off += 2;
	/* Every extension is looked at: an ECH extension may come after the
	 * server_name. */
	__u32 sni = 0, sni_len = 0;
	int ech = 0, i;
	for (i = 0; i < 64; i++) {
		off &= 0x7fff;
		if (off == xend)
			break;
		if (off + 4 > xend || d + off + 4 > end)
			return sni_refuse(st, REASON_NOT_TLS, 0, 0);
		__u32 t = ((__u32)d[off] << 8) | d[off + 1];
		__u32 l = ((__u32)d[off + 2] << 8) | d[off + 3];
		if (t == TLS_EXT_SNI && !sni) {
			sni = off + 4;
			sni_len = l;
		}
		if (t == TLS_EXT_ECH)
			ech = 1;
		off += 4 + l;
		if (off > xend)
			return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	}
	if (i == 64)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	if (!sni)
		return sni_refuse(st, REASON_NO_SNI, 0, 0);
	/* server_name: the list's length (2), a type (1) that is host_name
	 * (0), the name's length (2), the name. */
	off = sni & 0x7fff;
	if (d + off + 5 > end || sni_len < 5)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	if (d[off + 2] != 0)
		return sni_refuse(st, REASON_NO_SNI, 0, 0);
	__u32 nl = ((__u32)d[off + 3] << 8) | d[off + 4];
	if (nl == 0 || nl + 5 > sni_len)
		return sni_refuse(st, REASON_NOT_TLS, 0, 0);
	if (nl >= SNI_NAME_MAX)
		return sni_refuse(st, REASON_SNI_LONG, 0, 0);
	off += 5;
	struct sni_key k = {.prefixlen = (8 + SNI_NAME_MAX) * 8};
	__builtin_memcpy(k.data, &st->session, 8);
	/* The name, lower-cased, reversed into the key. Unrolled, so that each
	 * byte of the key has a constant index (a loop's index, once the
	 * compiler folds the bound into j < nl, is not bounded for the
	 * verifier); the name's byte is read at a masked offset. */
#pragma unroll
	for (int j = 0; j < SNI_NAME_MAX - 1; j++) {
		if (j < nl) {
			__u8 *p = d + ((off + nl - 1 - j) & 0x7fff);
			if (p + 1 > end)
				return sni_refuse(st, REASON_NOT_TLS, 0, 0);
			__u8 c = lower(*p);
			if (c == 0)
				return sni_refuse(st, REASON_NOT_TLS, 0, 0);
			k.data[8 + j] = c;
		}
	}
	/* An allowed outer SNI says nothing of the inner one, which the
	 * server routes by; a name not allowed is refused as such. One lookup
	 * on the allowed path (sni_judge's). */
	if (ech)
		return sni_refuse(st, bpf_map_lookup_elem(&sni_names, &k) ? REASON_ECH : REASON_SNI, &k, nl);
	return sni_judge(st, &k, nl);
}


SEC("sk_msg")
int sluice_sni(struct sk_msg_md *msg)
{
	struct sni_state *st = bpf_sk_storage_get(&sni_states, msg->sk, 0, 0);
	if (!st || st->state == SNI_VERIFIED)
		return SK_PASS;
	if (st->state != SNI_PENDING)
		return SK_DROP;
	__u32 size = msg->size;
	if (!size)
		return SK_PASS;
	if (bpf_msg_pull_data(msg, 0, 1, 0))
		return sni_refuse(st, REASON_NO_NAME, 0, 0);
	if (msg->data + 1 > msg->data_end)
		return sni_refuse(st, REASON_NO_NAME, 0, 0);
	/* A TLS record's first byte: judged as TLS, strictly, on every
	 * port (a server reads a handshake whatever version the record
	 * header claims). */
	if (*(__u8 *)msg->data == 0x16)
		return judge_tls(msg, st);
	if (!http_check()) {
		/* Before Linux 6.4 only TLS is read here (verify.h). */
		if (st->strict)
			return sni_refuse(st, REASON_NO_NAME, 0, 0);
		st->state = SNI_VERIFIED;
		return SK_PASS;
	}
	__u32 n = size < HTTP_HEAD_MAX ? size : HTTP_HEAD_MAX;
	if (bpf_msg_pull_data(msg, 0, n, 0))
		return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
	__u8 *d = msg->data, *end = msg->data_end;
	__u32 s = 0, m = 0;
	int c = classify_http(d, end, size, &s, &m);
	if (c == FLIGHT_HTTP)
		return judge_http(msg, st, d, end, s, m);
	if (c == FLIGHT_MORE)
		return cork_more(msg, size + 1);
	if (c == FLIGHT_LONG) {
		st->http = 1;
		return sni_refuse(st, REASON_NOT_HTTP, 0, 0);
	}
	/* Neither TLS nor HTTP: refused on a strict socket, otherwise the
	 * connection is the kernel's own from here, unjudged. */
	if (st->strict)
		return sni_refuse(st, REASON_NO_NAME, 0, 0);
	st->state = SNI_VERIFIED;
	return SK_PASS;
}
