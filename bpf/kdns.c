// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* The kernel DNS path's compilation unit (loader/kdns_bpfel.o): the
 * parsers and judges (kdns.h says what they judge) and the two programs,
 * sluice_kdns_egress, reached by a tail call from sluice_egress (egress.c,
 * in the main object) through the kdns_tail program array, and
 * sluice_kdns_ingress, attached to the cgroup of each session on the
 * kernel path (or auto). Its maps are the main object's (the loader
 * replaces them) but for the per-CPU scratch space, which is its own.
 * bpf/kdns_test.c includes this file for the fuzz targets. */

#include "common.h"
#include "kdns.h"

#define KDNS_QPKT 512   /* queries: the buffer the egress parser reads */
#define KDNS_APKT 2048  /* answers: larger ones go to user space */
#define KDNS_MAX_ADDRS 16
#define KDNS_MAX_RRS 40
#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL
#define DNS_TYPE_A 1
#define DNS_TYPE_NS 2
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_SOA 6
#define DNS_TYPE_AAAA 28
#define DNS_TYPE_OPT 41
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

/* Index masks the compiler cannot fold away: the verifier needs every
 * variable offset into a scratch buffer visibly bounded. */
static __always_inline __u32 kdns_qi(__u32 i)
{
	asm volatile("%0 &= 511" : "+r"(i));
	return i;
}

static __always_inline __u32 kdns_ai(__u32 i)
{
	asm volatile("%0 &= 2047" : "+r"(i));
	return i;
}

static __always_inline __u32 kdns_xi(__u32 i)
{
	asm volatile("%0 &= 15" : "+r"(i));
	return i;
}

static __always_inline __u32 kdns_ni(__u32 i)
{
	asm volatile("%0 &= 255" : "+r"(i));
	return i;
}

/* Scratch space, one per CPU and per program: ingress (softirq) can
 * interrupt egress on the same CPU, so they never share one. */
struct kdns_qscratch {
	__u8 pkt[KDNS_QPKT];
	__u8 name[256];
	__u8 is_label[256];
	struct kdns_query q;
};

struct kdns_addr {
	__u8 addr[16];
	__u32 ttl;
};

struct kdns_ascratch {
	__u8 pkt[KDNS_APKT];
	__u32 zero; /* never written: see kdns_name_at */
	__u8 owner[256];
	__u8 chain[256];
	struct kdns_addr addrs[KDNS_MAX_ADDRS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kdns_qscratch);
} kdns_qscratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kdns_ascratch);
} kdns_ascratch SEC(".maps");

/* The addresses and ports of one UDP datagram. */
struct kdns_l4 {
	__u32 src[4], dst[4]; /* IPv4 as ::ffff:a.b.c.d */
	__u16 sport, dport;   /* network order */
	__u32 off;            /* of the UDP payload */
	__u32 len;            /* of the UDP payload */
	__u8 family;
};

/* kdns_parse_l4: 0 for a UDP datagram it understood, -1 for anything else
 * (fragments, extension headers, other protocols). */
static __always_inline int kdns_parse_l4(struct __sk_buff *skb, struct kdns_l4 *l)
{
	__u8 udp[8];

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		__u8 h[20];
		if (bpf_skb_load_bytes(skb, 0, h, 20))
			return -1;
		if (h[9] != IPPROTO_UDP)
			return -1;
		__u16 frag = ((__u16)h[6] << 8) | h[7];
		if (frag & (IP_MF | IP_OFFSET))
			return -1;
		l->off = (h[0] & 0xf) * 4;
		l->family = AF_INET;
		l->src[2] = l->dst[2] = bpf_htonl(0xffff);
		__builtin_memcpy(&l->src[3], h + 12, 4);
		__builtin_memcpy(&l->dst[3], h + 16, 4);
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		__u8 h[40];
		if (bpf_skb_load_bytes(skb, 0, h, 40))
			return -1;
		if (h[6] != IPPROTO_UDP)
			return -1;
		l->off = 40;
		l->family = AF_INET6;
		__builtin_memcpy(l->src, h + 8, 16);
		__builtin_memcpy(l->dst, h + 24, 16);
	} else {
		return -1;
	}
	if (bpf_skb_load_bytes(skb, l->off, udp, 8))
		return -1;
	__builtin_memcpy(&l->sport, udp, 2);
	__builtin_memcpy(&l->dport, udp + 2, 2);
	__u32 ulen = ((__u32)udp[4] << 8) | udp[5];
	if (ulen < 8 || l->off + ulen > skb->len)
		return -1;
	l->off += 8;
	l->len = ulen - 8;
	return 0;
}
/* kdns_is_upstream reports whether addr:port (IPv4 as ::ffff:a.b.c.d,
 * port in network order) is the session's upstream: only that traffic of a
 * redirected socket is DNS of the kernel path. A socket that also talks to
 * other peers (one unconnected socket for everything) keeps that traffic,
 * judged by the sock_addr hooks as usual. */
static __always_inline int kdns_is_upstream(const struct kdns_session *ks, const __u32 addr[4], __u16 port)
{
	if (addr[0] == 0 && addr[1] == 0 && addr[2] == bpf_htonl(0xffff))
		return ks->up4 && addr[3] == ks->up4 && port == ks->port4;
	return addr[0] == ks->up6[0] && addr[1] == ks->up6[1] && addr[2] == ks->up6[2] &&
	       addr[3] == ks->up6[3] && port == ks->port6;
}

/* kdns_segmented reports an skb that the wire carries as several
 * datagrams: the cgroup hooks run before UDP GSO splits a send with
 * UDP_SEGMENT (egress) and after GRO coalesced datagrams for a socket with
 * UDP_GRO (ingress), so the judge would read one message where the peer
 * reads several, cut wherever the sender chose. Measured: a datagram that
 * read as one query for a name under an allowed wildcard, cut into
 * segments, carried a whole query for an unlisted name as its second.
 *
 * Such an skb of the path's DNS is never judged: egress drops it and tells
 * user space (an event without bytes, for the refusal's line), ingress
 * drops it and hands its start to user space. Its bytes are not handed to
 * user space on egress, which cannot tell where one query ends either
 * (the segment size is not in the event); the client's queries are lost
 * and retried, which costs nothing real: DNS clients do not batch queries
 * with GSO. The check is here and not (only) in the setsockopt hook
 * because UDP_SEGMENT also comes as a control message of one sendmsg,
 * which no hook but this one sees; and refusing the socket option would
 * break QUIC on every session socket, where GSO is common and harmless.
 * An skb whose data fits one segment has no gso_size (one datagram), so
 * the allowed path reads two fields and goes on. */
static __always_inline int kdns_segmented(const struct __sk_buff *skb)
{
	return skb->gso_segs > 1 || skb->gso_size;
}
/* ---- egress: the query ---- */

struct kdns_qparse {
	struct kdns_qscratch *s;
	__u32 len, pos, next, nlen;
	__u32 first; /* where the current label's first byte is in the message */
	__u32 xn;    /* offset in name of the first "xn--" label's length byte, or 256 */
	int done, bad;
};

/* kdns_label_byte is the resolver's rule for a byte of a label (lower
 * case): allowlist.NormalizeName, through which the resolver path sends
 * every name it is asked, admits letters, digits, '-' and '_' only, so a
 * label that holds a '.', a NUL, a space, a backslash or any other byte is
 * refused there, and must not be forwarded verbatim here: an upstream that
 * flattens names to text reads "a.b" in one label as two, and so another
 * name than the one judged. */
static __always_inline int kdns_label_byte(__u8 b)
{
	return (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') || b == '-' || b == '_';
}

/* kdns_qname_step reads one byte of the question's name into name (lower
 * case). It holds every label to the resolver's rule (checkLabel in
 * allowlist): the bytes of kdns_label_byte, no '-' first or last. A
 * label that starts "xn--" must also be valid punycode there, which the
 * kernel does not decode: it notes where the first such label is, and the
 * query passes only if that label lies in the allowlist entry's own part of
 * the name (validated when the entry was), else user space judges it. */
static long kdns_qname_step(__u32 i, void *ctx)
{
	struct kdns_qparse *c = ctx;
	struct kdns_qscratch *s = c->s;
	__u32 pos = c->pos, n = c->nlen;

	if (pos >= c->len || n >= 255) {
		c->bad = 1;
		return 1;
	}
	__u8 b = s->pkt[kdns_qi(pos)];
	if (pos == c->next) {
		s->is_label[kdns_ni(n)] = 1;
		if (b == 0) {
			s->name[kdns_ni(n)] = 0;
			c->nlen = n + 1;
			c->pos = pos + 1;
			c->done = 1;
			return 1;
		}
		if (b > 63) { /* compression or an extended label: not canonical */
			c->bad = 1;
			return 1;
		}
		c->next = pos + 1 + b;
		c->first = pos + 1;
	} else {
		s->is_label[kdns_ni(n)] = 0;
		if (b >= 'A' && b <= 'Z')
			b += 'a' - 'A';
		if (!kdns_label_byte(b) || (b == '-' && (pos == c->first || pos + 1 == c->next))) {
			c->bad = 1;
			return 1;
		}
		/* The fourth byte of a label: n - 4 is its length byte. */
		if (pos == c->first + 3 && b == '-' && c->xn == 256 && n >= 4 &&
		    s->name[kdns_ni(n - 3)] == 'x' && s->name[kdns_ni(n - 2)] == 'n' &&
		    s->name[kdns_ni(n - 1)] == '-')
			c->xn = n - 4;
	}
	s->name[kdns_ni(n)] = b;
	c->nlen = n + 1;
	c->pos = pos + 1;
	return 0;
}

struct kdns_cmp {
	const __u8 *a; /* 256 bytes */
	const __u8 *b; /* 256 bytes */
	__u32 aoff;
	int differ;
};

static long kdns_cmp_step(__u32 i, void *ctx)
{
	struct kdns_cmp *c = ctx;
	if (c->a[kdns_ni(c->aoff + i)] != c->b[kdns_ni(i)]) {
		c->differ = 1;
		return 1;
	}
	return 0;
}

struct kdns_match {
	struct kdns_qscratch *s;
	__u64 session;
	__u64 h;
	__u32 nlen;
	__u32 at; /* where the matched suffix starts in the name */
	int found;
	int private;
};

/* kdns_match_step hashes the name from its last byte backwards; at every
 * label start it looks the suffix up (a wildcard's domain, or at offset 0
 * the name itself) and confirms a hit byte by byte. The last hit is the
 * longest suffix: the most specific entry decides allow_private. */
static long kdns_match_step(__u32 i, void *ctx)
{
	struct kdns_match *c = ctx;
	struct kdns_qscratch *s = c->s;
	if (i >= c->nlen)
		return 1;
	__u32 j = c->nlen - 1 - i;
	c->h = (c->h ^ s->name[kdns_ni(j)]) * FNV_PRIME;
	if (!s->is_label[kdns_ni(j)] || j + 1 == c->nlen)
		return 0;
	struct kdns_name_key k = {.session = c->session, .hash = c->h};
	struct kdns_name *v = bpf_map_lookup_elem(&kdns_names, &k);
	if (!v)
		return 0;
	__u32 want = j == 0 ? KDNS_NAME_EXACT : KDNS_NAME_WILD;
	if (!(v->flags & want) || v->len != c->nlen - j)
		return 0;
	struct kdns_cmp cmp = {.a = s->name, .b = v->name, .aoff = j};
	bpf_loop(v->len & 255, kdns_cmp_step, &cmp, 0);
	if (cmp.differ)
		return 0;
	c->found = 1;
	c->at = j;
	c->private = !!(v->flags & (j == 0 ? KDNS_NAME_EXACT_PRIVATE : KDNS_NAME_WILD_PRIVATE));
	return 0;
}

/* kdns_report hands a datagram to user space; false when nobody listens. */
static __always_inline void kdns_report(struct kdns_l4 *l, __u64 session, __u64 cookie, __u8 kind, __u8 why,
					const __u8 *msg, __u32 len, int egress)
{
	struct kdns_event *e;
	void *rb = bpf_map_lookup_elem(&kdns_session_events, &session);

	if (rb)
		e = bpf_ringbuf_reserve(rb, sizeof(*e), 0);
	else
		e = bpf_ringbuf_reserve(&kdns_events, sizeof(*e), 0);
	if (!e)
		return;
	e->session = session;
	e->cookie = cookie;
	e->kind = kind;
	e->why = why;
	e->family = l->family;
	e->pad = 0;
	e->pad2 = 0;
	e->pid = 0;
	if (egress) {
		__builtin_memcpy(e->client, l->src, 16);
		e->client_port = bpf_ntohs(l->sport);
		__builtin_memcpy(e->upstream, l->dst, 16);
		e->upstream_port = bpf_ntohs(l->dport);
	} else {
		__builtin_memcpy(e->client, l->dst, 16);
		e->client_port = bpf_ntohs(l->dport);
		__builtin_memcpy(e->upstream, l->src, 16);
		e->upstream_port = bpf_ntohs(l->sport);
	}
	if (len > KDNS_MSG_MAX)
		len = KDNS_MSG_MAX;
	e->len = len;
	__builtin_memcpy(e->msg, msg, KDNS_MSG_MAX);
	bpf_ringbuf_submit(e, 0);
}

/* kdns_egress_judge judges a datagram of a redirected socket of session
 * (whose cookie is cookie): the egress program's body, and the fuzz
 * target's (bpf/kdns_test.c). */
static __always_inline int kdns_egress_judge(struct __sk_buff *skb, __u64 session, __u64 cookie)
{
	__u32 zero = 0;
	struct kdns_qscratch *s = bpf_map_lookup_elem(&kdns_qscratch, &zero);
	struct kdns_l4 l = {};
	if (!s)
		return KDNS_DROP_QUIET;
	/* Unparsable datagrams of a redirected socket never leave. */
	if (kdns_parse_l4(skb, &l))
		return KDNS_DROP_QUIET;
	struct kdns_session *ks = bpf_map_lookup_elem(&kdns_sessions, &session);
	if (ks && !kdns_is_upstream(ks, l.dst, l.dport))
		return KDNS_PASS;
	if (kdns_segmented(skb)) {
		/* Dropped unjudged; user space is only told (no bytes: it
		 * could not split them either), so the refusal is explained. */
		kdns_report(&l, session, cookie, KDNS_EV_QUERY, KDNS_WHY_SEGMENTED, s->pkt, 0, 1);
		return KDNS_DROP_QUIET;
	}
	if (l.len > KDNS_QPKT || l.len < 12)
		return KDNS_DROP_QUIET;
	__u32 len = l.len;
	if (bpf_skb_load_bytes(skb, l.off, s->pkt, len & (KDNS_QPKT - 1) ? len & (KDNS_QPKT - 1) : KDNS_QPKT))
		return KDNS_DROP_QUIET;

	__u8 why = KDNS_WHY_NOT_CANONICAL;
	const __u8 *p = s->pkt;
	__u16 id = ((__u16)p[0] << 8) | p[1];
	__u16 qd = ((__u16)p[4] << 8) | p[5], an = ((__u16)p[6] << 8) | p[7];
	__u16 ns = ((__u16)p[8] << 8) | p[9], ar = ((__u16)p[10] << 8) | p[11];
	struct kdns_query *q = &s->q;
	q->state = KDNS_Q_USER;
	q->name_len = 0;
	q->qtype = 0;
	q->allow_private = 0;

	/* QR = 0, opcode QUERY, one question, nothing else but an OPT. */
	if ((p[2] & 0xf8) || qd != 1 || an || ns || ar > 1)
		goto punt;
	struct kdns_qparse c = {.s = s, .len = len, .pos = 12, .next = 12, .xn = 256};
	bpf_loop(256, kdns_qname_step, &c, 0);
	if (!c.done || c.bad)
		goto punt;
	__u32 pos = c.pos;
	if (pos + 4 > len)
		goto punt;
	__u16 qtype = ((__u16)p[kdns_qi(pos)] << 8) | p[kdns_qi(pos + 1)];
	__u16 qclass = ((__u16)p[kdns_qi(pos + 2)] << 8) | p[kdns_qi(pos + 3)];
	pos += 4;
	if (qclass != 1)
		goto punt;
	if (ar) {
		/* A bare OPT: root name, type 41, class, TTL, rdlen 0. */
		if (pos + 11 != len || p[kdns_qi(pos)] != 0 ||
		    p[kdns_qi(pos + 1)] != 0 || p[kdns_qi(pos + 2)] != DNS_TYPE_OPT ||
		    p[kdns_qi(pos + 9)] != 0 || p[kdns_qi(pos + 10)] != 0)
			goto punt;
	} else if (pos != len) {
		goto punt;
	}
	__u32 nlen = c.nlen;
	q->name_len = nlen;
	q->qtype = qtype;
	__builtin_memcpy(q->name, s->name, 256);

	struct kdns_match m = {.s = s, .session = session, .h = FNV_OFFSET, .nlen = nlen};
	bpf_loop(256, kdns_match_step, &m, 0);
	if (!m.found) {
		why = KDNS_WHY_NOT_LISTED;
		goto punt;
	}
	if (c.xn < m.at) /* an A-label the entry did not bring: user space decodes it */
		goto punt;
	if (qtype != DNS_TYPE_A && qtype != DNS_TYPE_AAAA) {
		why = KDNS_WHY_QTYPE;
		goto punt;
	}
	q->state = KDNS_Q_KERNEL;
	q->allow_private = m.private;

punt:
	q->session = session;
	q->ts = bpf_ktime_get_boot_ns();
	__builtin_memcpy(q->upstream, l.dst, 16);
	q->uport = l.dport;
	struct kdns_query_key k = {.cookie = cookie, .id = id};
	if (bpf_map_update_elem(&kdns_queries, &k, q, BPF_ANY))
		return KDNS_DROP_QUIET;
	if (q->state == KDNS_Q_KERNEL) {
		__u64 *n = bpf_map_lookup_elem(&kdns_counts, &zero);
		if (n)
			*n += 1;
		return KDNS_PASS;
	}
	kdns_report(&l, session, cookie, KDNS_EV_QUERY, why, s->pkt, len, 1);
	return KDNS_DROP_QUIET;
}

/* ---- ingress: the answer ---- */

struct kdns_dname {
	struct kdns_ascratch *s;
	__u8 *out; /* 256 bytes */
	__u32 len, pos, end, rem, olen, jumps;
	int jumped, done, bad;
};

/* kdns_dname_step decodes one byte of a (possibly compressed) name into
 * out, lower case; end is where the name ends in the message. */
static long kdns_dname_step(__u32 i, void *ctx)
{
	struct kdns_dname *c = ctx;
	__u32 pos = c->pos, n = c->olen;

	if (pos >= c->len || n >= 255) {
		c->bad = 1;
		return 1;
	}
	__u8 b = c->s->pkt[kdns_ai(pos)];
	if (c->rem) {
		if (b >= 'A' && b <= 'Z')
			b += 'a' - 'A';
		c->out[kdns_ni(n)] = b;
		c->olen = n + 1;
		c->rem--;
		c->pos = pos + 1;
		return 0;
	}
	if (b == 0) {
		c->out[kdns_ni(n)] = 0;
		c->olen = n + 1;
		if (!c->jumped)
			c->end = pos + 1;
		c->done = 1;
		return 1;
	}
	if ((b & 0xc0) == 0xc0) {
		if (pos + 1 >= c->len || ++c->jumps > 32) {
			c->bad = 1;
			return 1;
		}
		if (!c->jumped) {
			c->end = pos + 2;
			c->jumped = 1;
		}
		c->pos = ((__u32)(b & 0x3f) << 8) | c->s->pkt[kdns_ai(pos + 1)];
		return 0;
	}
	if (b & 0xc0) {
		c->bad = 1;
		return 1;
	}
	c->out[kdns_ni(n)] = b;
	c->olen = n + 1;
	c->rem = b;
	c->pos = pos + 1;
	return 0;
}

/* kdns_name_at decodes the name at pos into out; it returns its length
 * (root label included) and sets *end, or 0 for a bad name. */
static __always_inline __u32 kdns_name_at(struct kdns_ascratch *s, __u8 *out, __u32 len, __u32 pos, __u32 *end)
{
	/* Loop-carried fields start from a map read the verifier cannot
	 * know: with constants it would explore every iteration on its own
	 * (over a million instructions); unknown ones converge at once. */
	__u32 z = s->zero;
	struct kdns_dname c = {.s = s, .out = out, .len = len, .pos = pos + z, .end = z, .rem = z,
			       .olen = z, .jumps = z, .jumped = z, .done = z, .bad = z};
	bpf_loop(256 + 33, kdns_dname_step, &c, 0);
	if (!c.done || c.bad)
		return 0;
	*end = c.end;
	return c.olen;
}

static __always_inline int kdns_public4(__u32 a) /* host order */
{
	__u8 o = a >> 24;
	if (o == 0 || o == 10 || o == 127 || o >= 224)
		return 0;
	if ((a & 0xffc00000) == 0x64400000) /* 100.64/10 */
		return 0;
	if ((a & 0xffff0000) == 0xa9fe0000) /* 169.254/16 */
		return 0;
	if ((a & 0xfff00000) == 0xac100000) /* 172.16/12 */
		return 0;
	if ((a & 0xffffff00) == 0xc0000000) /* 192.0.0/24 */
		return 0;
	if ((a & 0xffff0000) == 0xc0a80000) /* 192.168/16 */
		return 0;
	if ((a & 0xfffe0000) == 0xc6120000) /* 198.18/15 */
		return 0;
	return 1;
}

/* kdns_public mirrors addrclass.Classify(a) == Public for a 16-byte
 * address (IPv4 as ::ffff:a.b.c.d). */
static __always_inline int kdns_public(const __u8 *a)
{
	__u32 w0 = ((__u32)a[0] << 24) | ((__u32)a[1] << 16) | ((__u32)a[2] << 8) | a[3];
	__u32 w1 = ((__u32)a[4] << 24) | ((__u32)a[5] << 16) | ((__u32)a[6] << 8) | a[7];
	__u32 w2 = ((__u32)a[8] << 24) | ((__u32)a[9] << 16) | ((__u32)a[10] << 8) | a[11];
	__u32 w3 = ((__u32)a[12] << 24) | ((__u32)a[13] << 16) | ((__u32)a[14] << 8) | a[15];

	if (w0 == 0 && w1 == 0 && w2 == 0xffff) /* v4-mapped */
		return kdns_public4(w3);
	if (w0 == 0x0064ff9b && w1 == 0 && w2 == 0) /* NAT64 */
		return kdns_public4(w3);
	if ((w0 >> 16) == 0x2002) /* 6to4 */
		return kdns_public4((w0 << 16) | (w1 >> 16));
	if (w0 == 0 && w1 == 0 && w2 == 0) /* ::, ::1, IPv4-compatible */
		return 0;
	if (w0 == 0x01000000 && w1 == 0) /* 100::/64 */
		return 0;
	if ((w0 >> 25) == (0xfc000000 >> 25)) /* fc00::/7 */
		return 0;
	if ((w0 >> 22) == (0xfe800000 >> 22)) /* fe80::/10 */
		return 0;
	if ((w0 >> 22) == (0xfec00000 >> 22)) /* fec0::/10 */
		return 0;
	if ((w0 >> 24) == 0xff)
		return 0;
	return 1;
}

struct kdns_walk {
	struct kdns_ascratch *s;
	struct kdns_query *q;
	struct kdns_session *ks;
	__u32 len, pos, an, ns, ar;
	__u32 chain_len, naddr, opts;
	__u32 chain_ptr; /* where the current chain name is written in the message */
	__u8 why; /* non-zero: user space decides */
	int bad;  /* malformed: user space decides too */
};

static __always_inline __u32 kdns_u16(struct kdns_ascratch *s, __u32 pos)
{
	return ((__u32)s->pkt[kdns_ai(pos)] << 8) | s->pkt[kdns_ai(pos + 1)];
}

struct kdns_cmp2 {
	struct kdns_ascratch *s;
	int differ;
};

static long kdns_cmp_owner_step(__u32 i, void *ctx)
{
	struct kdns_cmp2 *c = ctx;
	if (c->s->owner[kdns_ni(i)] != c->s->chain[kdns_ni(i)]) {
		c->differ = 1;
		return 1;
	}
	return 0;
}

/* kdns_rr_step judges one resource record of the answer. */
static long kdns_rr_step(__u32 i, void *ctx)
{
	struct kdns_walk *w = ctx;
	struct kdns_ascratch *s = w->s;
	__u32 end = 0;

	if (i >= w->an + w->ns + w->ar)
		return 1;
	/* The common owner is a pointer to where the chain's current name is
	 * written (the question, or the last CNAME's target): no need to
	 * decode and compare it. */
	__u32 pos = w->pos, olen, same = 0;
	__u8 b0 = s->pkt[kdns_ai(pos)], b1 = s->pkt[kdns_ai(pos + 1)];
	if (i < w->an && pos + 2 <= w->len && (b0 & 0xc0) == 0xc0 &&
	    ((((__u32)b0 & 0x3f) << 8) | b1) == w->chain_ptr) {
		olen = w->chain_len;
		end = pos + 2;
		same = 1;
	} else {
		olen = kdns_name_at(s, s->owner, w->len, pos, &end);
	}
	if (!olen || end + 10 > w->len) {
		w->bad = 1;
		return 1;
	}
	__u32 type = kdns_u16(s, end), class = kdns_u16(s, end + 2);
	__u32 ttl = (kdns_u16(s, end + 4) << 16) | kdns_u16(s, end + 6);
	__u32 rdlen = kdns_u16(s, end + 8), rd = end + 10;
	if (rd + rdlen > w->len) {
		w->bad = 1;
		return 1;
	}
	w->pos = rd + rdlen;

	if (i >= w->an + w->ns) { /* additional: one bare OPT at most */
		if (type != DNS_TYPE_OPT || olen != 1 || w->opts++) {
			w->why = KDNS_WHY_RECORDS;
			return 1;
		}
		return 0;
	}
	if (i >= w->an) { /* authority: SOA only (negative answers), as the resolver keeps */
		if (type != DNS_TYPE_SOA) {
			w->why = KDNS_WHY_RECORDS;
			return 1;
		}
		return 0;
	}
	/* answer: every record belongs to the chain that starts at the
	 * asked name, in order. */
	struct kdns_cmp2 cmp = {.s = s};
	if (class != 1 || olen != w->chain_len) {
		w->why = KDNS_WHY_RECORDS;
		return 1;
	}
	if (!same)
		bpf_loop(olen & 255, kdns_cmp_owner_step, &cmp, 0);
	if (cmp.differ) {
		w->why = KDNS_WHY_RECORDS;
		return 1;
	}
	if (ttl > w->ks->max_ttl) {
		w->why = KDNS_WHY_TTL;
		return 1;
	}
	if (type == DNS_TYPE_CNAME) {
		__u32 tend = 0;
		__u32 tl = kdns_name_at(s, s->chain, rd + rdlen, rd, &tend);
		if (!tl || tend != rd + rdlen) {
			w->bad = 1;
			return 1;
		}
		w->chain_len = tl;
		w->chain_ptr = rd;
		return 0;
	}
	if ((type != DNS_TYPE_A || rdlen != 4) && (type != DNS_TYPE_AAAA || rdlen != 16)) {
		w->why = KDNS_WHY_RECORDS;
		return 1;
	}
	__u32 n = w->naddr;
	if (n >= KDNS_MAX_ADDRS || (w->ks->max_ips && n >= w->ks->max_ips)) {
		w->why = KDNS_WHY_CAP;
		return 1;
	}
	struct kdns_addr *a = &s->addrs[kdns_xi(n)];
	if (rdlen == 4) {
		__builtin_memset(a->addr, 0, 10);
		a->addr[10] = 0xff;
		a->addr[11] = 0xff;
		a->addr[12] = s->pkt[kdns_ai(rd)];
		a->addr[13] = s->pkt[kdns_ai(rd + 1)];
		a->addr[14] = s->pkt[kdns_ai(rd + 2)];
		a->addr[15] = s->pkt[kdns_ai(rd + 3)];
	} else {
		for (int k = 0; k < 16; k++)
			a->addr[k] = s->pkt[kdns_ai(rd + k)];
	}
	if (!w->q->allow_private && !kdns_public(a->addr)) {
		w->why = KDNS_WHY_PRIVATE;
		return 1;
	}
	a->ttl = ttl;
	w->naddr = n + 1;
	return 0;
}

struct kdns_learn {
	struct kdns_ascratch *s;
	__u64 session;
	struct kdns_session *ks;
	struct kdns_query *q; /* the question the answer is for */
	__u32 naddr;
	int full;
	/* No more: the ingress program's stack with this frame's is at the
	 * verifier's 512-byte bound. */
};

static long kdns_learn_step(__u32 i, void *ctx)
{
	struct kdns_learn *c = ctx;
	if (i >= c->naddr || i >= KDNS_MAX_ADDRS)
		return 1;
	struct kdns_addr *a = &c->s->addrs[kdns_xi(i)];
	__u64 ttl = a->ttl;
	if (ttl < c->ks->min_ttl)
		ttl = c->ks->min_ttl;
	if (ttl > c->ks->max_ttl)
		ttl = c->ks->max_ttl;
	struct learned_key k = {.session = c->session};
	__builtin_memcpy(k.addr, a->addr, 16);
	struct learned_value v = {.expires = bpf_ktime_get_boot_ns() + (ttl + c->ks->grace) * 1000000000ULL};
	struct learned_value *old = bpf_map_lookup_elem(&learned, &k);
	/* The kernel path learns only names without "ports": the address is
	 * now open on every port (the union of its names' rules). */
	bpf_map_delete_elem(&learned_ports, &k);
	bpf_map_update_elem(&kdns_learned_from, &k, c->q, BPF_ANY);
	if (old) {
		/* An expiry only grows. */
		if (old->expires < v.expires)
			old->expires = v.expires;
		return 0;
	}
	if (bpf_map_update_elem(&learned, &k, &v, BPF_NOEXIST)) {
		old = bpf_map_lookup_elem(&learned, &k);
		if (!old) {
			c->full = 1;
			return 1;
		}
		if (old->expires < v.expires)
			old->expires = v.expires;
	}
	return 0;
}

static long kdns_cmp_q_step(__u32 i, void *ctx)
{
	struct kdns_cmp *c = ctx;
	if (c->a[kdns_ni(i)] != c->b[kdns_ni(i)]) {
		c->differ = 1;
		return 1;
	}
	return 0;
}

/* kdns_ingress_judge judges a datagram arriving on a redirected socket of
 * session (whose cookie is cookie): the ingress program's body, and the
 * fuzz target's (bpf/kdns_test.c). */
static __always_inline int kdns_ingress_judge(struct __sk_buff *skb, __u64 session, __u64 cookie)
{
	struct kdns_l4 l = {};
	if (kdns_parse_l4(skb, &l))
		return 0;
	struct kdns_session *ks = bpf_map_lookup_elem(&kdns_sessions, &session);
	if (ks && !kdns_is_upstream(ks, l.src, l.sport))
		return 1; /* not the upstream: not this path's DNS */
	if (l.len < 12)
		return 0;
	__u8 hdr[12];
	if (bpf_skb_load_bytes(skb, l.off, hdr, 12))
		return 0;
	struct kdns_query_key k = {.cookie = cookie, .id = ((__u32)hdr[0] << 8) | hdr[1]};
	struct kdns_query *q = bpf_map_lookup_elem(&kdns_queries, &k);
	/* An answer nobody asked for, or from elsewhere, never arrives. */
	if (!q || q->session != session || q->uport != l.sport || q->upstream[0] != l.src[0] ||
	    q->upstream[1] != l.src[1] || q->upstream[2] != l.src[2] || q->upstream[3] != l.src[3])
		return 0;
	__u32 zero = 0;
	struct kdns_ascratch *s = bpf_map_lookup_elem(&kdns_ascratch, &zero);
	__u8 why = KDNS_WHY_RECORDS;
	__u32 len = l.len;
	/* Coalesced answers (GRO) are judged by nobody: user space injects
	 * the answer itself; checked before a user space record, so that no
	 * coalesced datagram rides through on one either. */
	if (kdns_segmented(skb)) {
		if (q->state != KDNS_Q_KERNEL || !s)
			return 0;
		why = KDNS_WHY_SEGMENTED;
		goto punt_start;
	}
	if (q->state != KDNS_Q_KERNEL) {
		/* User space answers this query: only its injected answer,
		 * which it judged and learned from, passes. Its raw socket
		 * marks it (SO_MARK needs CAP_NET_ADMIN, which no session
		 * process has, and no mark crosses the wire); anything else
		 * from the upstream's address with this ID (a late duplicate,
		 * a forgery) would reach the client unjudged. */
		if (skb->mark != KDNS_INJECT_MARK)
			return 0;
		bpf_map_delete_elem(&kdns_queries, &k);
		return 1;
	}
	if (!ks || !s)
		return 0;

	if (len > KDNS_APKT) {
		why = KDNS_WHY_TOO_BIG;
		goto punt_start;
	}
	if (bpf_skb_load_bytes(skb, l.off, s->pkt, len & (KDNS_APKT - 1) ? len & (KDNS_APKT - 1) : KDNS_APKT))
		return 0;
	/* QR, opcode QUERY, one question. */
	if ((hdr[2] & 0xf8) != 0x80 || hdr[4] != 0 || hdr[5] != 1)
		goto punt;
	if (hdr[2] & 0x02) {
		why = KDNS_WHY_TRUNCATED;
		goto punt;
	}
	__u32 end = 0;
	__u32 qlen = kdns_name_at(s, s->chain, len, 12, &end);
	if (!qlen || qlen != q->name_len || end + 4 > len)
		goto punt;
	struct kdns_cmp cmp = {.a = s->chain, .b = q->name};
	bpf_loop(qlen & 255, kdns_cmp_q_step, &cmp, 0);
	if (cmp.differ || kdns_u16(s, end) != q->qtype || kdns_u16(s, end + 2) != 1)
		goto punt;

	__u32 an = ((__u32)hdr[6] << 8) | hdr[7], ns = ((__u32)hdr[8] << 8) | hdr[9];
	__u32 ar = ((__u32)hdr[10] << 8) | hdr[11];
	if (an + ns + ar > KDNS_MAX_RRS)
		goto punt;
	__u32 z = s->zero;
	struct kdns_walk w = {.s = s, .q = q, .ks = ks, .len = len, .pos = end + 4 + z,
			      .an = an, .ns = ns, .ar = ar, .chain_len = qlen + z, .naddr = z,
			      .opts = z, .why = z, .bad = z, .chain_ptr = 12 + z};
	bpf_loop(KDNS_MAX_RRS, kdns_rr_step, &w, 0);
	if (w.why) {
		why = w.why;
		goto punt;
	}
	if (w.bad || w.pos != len)
		goto punt;
	/* Only a NOERROR answer teaches anything; others pass as they are. */
	if ((hdr[3] & 0x0f) == 0 && w.naddr) {
		struct kdns_learn lc = {.s = s, .session = session, .naddr = w.naddr, .ks = ks, .q = q};
		bpf_loop(KDNS_MAX_ADDRS, kdns_learn_step, &lc, 0);
		if (lc.full) {
			why = KDNS_WHY_MAP_FULL;
			goto punt;
		}
	}
	bpf_map_delete_elem(&kdns_queries, &k);
	return 1;

punt_start: /* user space needs only the header and the question */
	len = len < KDNS_MSG_MAX ? len : KDNS_MSG_MAX;
	len = len & (KDNS_MSG_MAX - 1) ? len & (KDNS_MSG_MAX - 1) : KDNS_MSG_MAX;
	if (bpf_skb_load_bytes(skb, l.off, s->pkt, len))
		return 0;
punt:
	q->state = KDNS_Q_USER;
	kdns_report(&l, session, cookie, KDNS_EV_ANSWER, why, s->pkt, len, 0);
	return 0;
}

/* Reached from sluice_egress by a tail call (kdns_tail), for UDP packets. */
SEC("cgroup_skb/egress")
int sluice_kdns_egress(struct __sk_buff *skb)
{
	if (!kdns_socket(skb))
		return KDNS_PASS;
	return kdns_egress_judge(skb, skb_session_cgroup(skb), bpf_get_socket_cookie(skb));
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
	return kdns_ingress_judge(skb, skb_session_cgroup(skb), bpf_get_socket_cookie(skb));
}
