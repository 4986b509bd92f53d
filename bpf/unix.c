// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* connect_unix and sendmsg_unix: which unix sockets a session may reach. */

#include "common.h"

/* ---- unix sockets: cgroup connect_unix and sendmsg_unix ----
 *
 * A session's connect() of a unix socket and its sendmsg() to a named
 * datagram peer are judged by the name it passes (a path, or an abstract
 * name), before the kernel resolves it: these hooks see nothing else.
 * Allowed: names in unix_allowed (exact, one hash lookup), any abstract
 * name when the session's Landlock scope judges those (SESSION_OWN_ABSTRACT),
 * and names matched by one of the session's globs or below one of its
 * prefixes (unix_globs, tried only when the exact lookup missed; a prefix
 * is the session's own socket directory, a tmpfs only the session can
 * populate, where symlinks are not followed). See loader/unix_linux.go for what that can and cannot
 * hold against (a name is not an inode). */

#define UNIX_GLOBS_MAX 16
#define GLOB_STEPS 4096

/* A session's glob: '*' matches a run of characters other than '/'. */
struct unix_glob_key {
	__u64 session;
	__u32 index;
	__u32 pad;
};

struct unix_glob {
	__u32 len;
	__u32 flags; /* GLOB_PREFIX */
	char pat[128];
};

/* A prefix entry (the session's own socket directory, "/dir/"): any clean
 * name below it, at any depth. */
#define GLOB_PREFIX 1

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SESSIONS * 4);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct unix_glob_key);
	__type(value, struct unix_glob);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} unix_globs SEC(".maps");

/* Per-CPU scratch for the slow path (the key and a glob do not fit the
 * 512-byte stack together). */
struct unix_scratch {
	struct unix_key k;
	char text[128];   /* the path again, with room for masked indexes */
	char pat[128];
	__u32 tlen, plen;
	__s32 i, j, star_i, star_j;
	__s32 result; /* 1 match, 0 no match, -1 undecided */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unix_scratch);
} unix_scratch SEC(".maps");

struct bpf_sock_addr_kern {
	void *sk;
	void *uaddr;
	__u64 tmp_reg;
	void *t_ctx;
	__u32 uaddrlen;
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* unix_name fills k with the name the caller passed. Returns 0 or -1. */
static __always_inline int unix_name(struct bpf_sock_addr *ctx, struct unix_key *k)
{
	struct bpf_sock_addr_kern *sa = bpf_cast_to_kern_ctx(ctx);
	__u32 alen = sa->uaddrlen;
	const char *p = (const char *)sa->uaddr + 2; /* sun_path */
	char first = 0;

	if (alen <= 2 || bpf_probe_read_kernel(&first, 1, p))
		return -1;
	__u32 n = alen - 2;
	if (first == 0) {
		n -= 1; /* the leading NUL */
		if (n > UNIX_PATH_MAX - 1)
			n = UNIX_PATH_MAX - 1;
		if (n && bpf_probe_read_kernel(k->path, n, p + 1))
			return -1;
		k->abstract = 1;
		k->len = n;
		return 0;
	}
	if (n > UNIX_PATH_MAX)
		n = UNIX_PATH_MAX;
	/* Copies up to the first NUL, at most n bytes, and terminates. */
	long r = bpf_probe_read_kernel_str(k->path, n + 1, p);
	if (r <= 0)
		return -1;
	k->len = r - 1;
	return 0;
}

/* bpf_loop's context must live on the stack: it carries the scratch. */
struct loop_ctx {
	struct unix_scratch *c;
};

/* One step of a wildcard match of text against pat, '*' never matching
 * '/': the classic matcher that remembers the last star. */
static long glob_step(__u64 idx, struct loop_ctx *lc)
{
	struct unix_scratch *c = lc->c;
	__s32 i = c->i, j = c->j;
	__u32 ti = i & 127, pj = j & 127;

	if ((__u32)i >= c->tlen) {
		/* Text consumed: the rest of the pattern must be stars. */
		if ((__u32)j >= c->plen) {
			c->result = 1;
			return 1;
		}
		if (c->pat[pj] == '*') {
			c->j = j + 1;
			return 0;
		}
		c->result = 0;
		return 1;
	}
	if ((__u32)j < c->plen && c->pat[pj] == '*') {
		c->star_j = j;
		c->star_i = i;
		c->j = j + 1;
		return 0;
	}
	if ((__u32)j < c->plen && c->pat[pj] == c->text[ti]) {
		c->i = i + 1;
		c->j = j + 1;
		return 0;
	}
	if (c->star_j >= 0 && c->text[c->star_i & 127] != '/') {
		c->star_i++;
		c->i = c->star_i;
		c->j = c->star_j + 1;
		return 0;
	}
	c->result = 0;
	return 1;
}

/* Any "", "." or ".." component makes a path unfit for glob matching (a
 * glob entry never has one; '*' must not stand for them). */
static long clean_step(__u64 idx, struct loop_ctx *lc)
{
	struct unix_scratch *c = lc->c;
	__u32 i = idx & 127;

	if (idx >= c->tlen) {
		c->result = 1;
		return 1;
	}
	if (c->text[i] != '/')
		return 0;
	char a = c->text[(i + 1) & 127], b = c->text[(i + 2) & 127], d = c->text[(i + 3) & 127];
	if (a == '/' || a == 0 || (a == '.' && (b == '/' || b == 0)) ||
	    (a == '.' && b == '.' && (d == '/' || d == 0))) {
		c->result = 0;
		return 1;
	}
	return 0;
}

/* One byte of a prefix comparison of text against pat. */
static long prefix_step(__u64 idx, struct loop_ctx *lc)
{
	struct unix_scratch *c = lc->c;
	__u32 i = idx & 127;

	if (idx >= c->plen) {
		c->result = 1;
		return 1;
	}
	if (c->pat[i] != c->text[i]) {
		c->result = 0;
		return 1;
	}
	return 0;
}

/* unix_glob_match tries the session's globs against c->k (pathnames only). */
static __always_inline int unix_glob_match(struct unix_scratch *c, __u64 cg)
{
	if (c->k.abstract || c->k.len == 0 || c->k.path[0] != '/')
		return 0;
	c->tlen = c->k.len;
	__builtin_memcpy(c->text, c->k.path, sizeof(c->k.path));
	__builtin_memset(c->text + sizeof(c->k.path), 0, sizeof(c->text) - sizeof(c->k.path));
	struct loop_ctx lc = {.c = c};
	c->result = -1;
	bpf_loop(UNIX_PATH_MAX, clean_step, &lc, 0);
	if (c->result != 1)
		return 0;
	for (__u32 g = 0; g < UNIX_GLOBS_MAX; g++) {
		struct unix_glob_key gk = {.session = cg, .index = g};
		struct unix_glob *gl = bpf_map_lookup_elem(&unix_globs, &gk);
		if (!gl)
			return 0;
		__builtin_memcpy(c->pat, gl->pat, sizeof(c->pat));
		c->plen = gl->len;
		c->result = -1;
		if (gl->flags & GLOB_PREFIX) {
			/* Below the directory, not the directory itself. */
			if (c->tlen > c->plen)
				bpf_loop(UNIX_PATH_MAX, prefix_step, &lc, 0);
			if (c->result == 1)
				return 1;
			continue;
		}
		c->i = c->j = 0;
		c->star_i = c->star_j = -1;
		bpf_loop(GLOB_STEPS, glob_step, &lc, 0);
		if (c->result == 1)
			return 1;
	}
	return 0;
}

static __always_inline void emit_unix(__u64 cg, __u8 hook, __u8 flags, struct unix_key *k)
{
	struct unix_event *e = reserve(cg, sizeof(*e));
	if (!e) {
		count(cg, COUNTER_EVENTS_LOST);
		return;
	}
	/* The shared header: no address, port or args for a unix peer. */
	struct verdict v = {.cgroup = cg, .hook = hook, .reason = REASON_NOT_ALLOWED, .family = 1 /* AF_UNIX */};
	fill_event(&e->e, &v, flags);
	e->abstract = k->abstract;
	e->pad[0] = e->pad[1] = e->pad[2] = 0;
	e->len = k->len;
	__builtin_memcpy(e->path, k->path, sizeof(e->path));
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int judge_unix(struct bpf_sock_addr *ctx, __u8 hook)
{
	struct session *s;
	__u64 cg = session_of(&s);
	__u32 zero = 0;
	struct unix_scratch *c = bpf_map_lookup_elem(&unix_scratch, &zero);

	if (!c)
		return 0;
	__builtin_memset(&c->k, 0, sizeof(c->k));
	c->k.session = cg;
	if (unix_name(ctx, &c->k))
		return 0; /* an address that cannot be read is refused */
	__u8 *v = s ? bpf_map_lookup_elem(&unix_allowed, &c->k) : 0;
	if (v && *v == UNIX_ALLOWED)
		return 1;
	if (v && *v == UNIX_QUIET) {
		/* Expected and harmless: the caller falls back to files and
		 * DNS. An event per lookup would bury the real refusals, and
		 * so would a count among them. */
		count(cg, COUNTER_QUIET);
		return (s->flags & SESSION_AUDIT) ? 1 : 0;
	}
	/* The session's Landlock domain has the abstract-socket scope: the
	 * kernel lets it reach only abstract sockets made inside the domain
	 * and refuses the rest itself, after this hook, when it finds the
	 * peer. User space is told (EVENT_SCOPED) and explains the refusal
	 * when the name belongs to no socket of the session. */
	if (s && c->k.abstract && (s->flags & SESSION_OWN_ABSTRACT)) {
		emit_unix(cg, hook, EVENT_SCOPED, &c->k);
		return 1;
	}
	if (s && unix_glob_match(c, cg))
		return 1;
	if (s && (s->flags & SESSION_AUDIT)) {
		count(cg, COUNTER_AUDITED);
		emit_unix(cg, hook, EVENT_AUDIT, &c->k);
		return 1;
	}
	count(cg, COUNTER_DENIED);
	emit_unix(cg, hook, 0, &c->k);
	return 0;
}

SEC("cgroup/connect_unix")
int sluice_connect_unix(struct bpf_sock_addr *ctx)
{
	return judge_unix(ctx, HOOK_UNIX_CONNECT);
}

SEC("cgroup/sendmsg_unix")
int sluice_sendmsg_unix(struct bpf_sock_addr *ctx)
{
	return judge_unix(ctx, HOOK_UNIX_SEND);
}
