// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* sk_msg of sni_socks: the TLS name check of a connection to port 443 of a
 * learned address (sni.h), on its first flight. */

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
		.hook = HOOK_TLS,
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

SEC("sk_msg")
int sluice_sni(struct sk_msg_md *msg)
{
	struct sni_state *st = bpf_sk_storage_get(&sni_states, msg->sk, 0, 0);
	if (!st || st->state == SNI_VERIFIED)
		return SK_PASS;
	if (st->state != SNI_PENDING)
		return SK_DROP;
	__u32 size = msg->size;
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
			__u8 c = *p;
			if (c >= 'A' && c <= 'Z')
				c += 'a' - 'A';
			if (c == 0)
				return sni_refuse(st, REASON_NOT_TLS, 0, 0);
			k.data[8 + j] = c;
		}
	}
	if (!bpf_map_lookup_elem(&sni_names, &k))
		return sni_refuse(st, REASON_SNI, &k, nl);
	/* An allowed outer SNI says nothing of the inner one, which the
	 * server routes by. */
	if (ech)
		return sni_refuse(st, REASON_ECH, &k, nl);
	st->state = SNI_VERIFIED;
	count(st->session, COUNTER_NAME_CHECKED);
	return SK_PASS;
}
