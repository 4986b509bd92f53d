// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

/* Shared definitions of the sluice datapath: map layouts and the event record.
 * The Go side gets these types from bpf2go (-type), so keep them plain C with
 * explicit padding: every byte of a map key must be initialised. */
#ifndef SLUICE_H
#define SLUICE_H

#include <linux/types.h>

#define MAX_SESSIONS 4096
#define MAX_CIDRS (256 * 1024)
#define MAX_LEARNED (128 * 1024)
#define SESSION_RINGBUF_SIZE (64 * 1024)
#define GLOBAL_RINGBUF_SIZE (256 * 1024)
#define MAX_UNIX (64 * 1024)
#define MAX_LOOPBACK_PORTS (64 * 1024)
#define UNIX_PATH_MAX 108
#define MAX_PORT_RULES (16 * 1024)

/* session.flags */
enum sluice_session_flag {
	SESSION_AUDIT = 1, /* allow everything, report what would be denied */
	SESSION_LOOPBACK_SESSION = 2, /* loopback only to the session's own listeners and listed ports */
	SESSION_OWN_ABSTRACT = 4, /* the session's Landlock scope judges abstract unix names: allow unlisted ones */
	SESSION_PORT_RULES = 8, /* some entry has "ports": consult cidr_ports and learned_ports */
};

/* A session's policy, keyed by the cgroup id of the session's cgroup.
 * dns_port4/6 (network order) are the loopback ports of the session's
 * resolver on 127.0.0.1 and ::1. dns_port4 == 0 means the session has no
 * resolver and port 53 is judged like any other port; dns_port6 == 0 (no
 * IPv6 loopback) sends IPv6 DNS to ::ffff:127.0.0.1. */
struct session {
	__u32 flags;
	__u16 dns_port4;
	__u16 dns_port6;
};

/* Where a redirected DNS socket meant to go, kept in the socket's own
 * storage so that it dies with the socket. */
struct dns_orig {
	__u32 ip[4]; /* network order, IPv4 as ::ffff:a.b.c.d */
	__u16 port;  /* network order */
	__u16 pad;   /* 1: sent to the session's upstream (kdns.h), 0: to its resolver */
};

/* Index of a counter in struct counters. */
enum sluice_counter {
	COUNTER_ALLOWED = 0,     /* non-loopback egress allowed */
	COUNTER_DENIED = 1,      /* refused (connect, sendmsg, socket, setsockopt, packet) */
	COUNTER_AUDITED = 2,     /* would have been denied, allowed by --audit */
	COUNTER_EVENTS_LOST = 3, /* ring buffer full */
	/* refused without an event: the name-service sockets glibc tries on
	 * every lookup (UNIX_QUIET). Apart from COUNTER_DENIED, which would
	 * otherwise grow by two per lookup and be useless for alerting. */
	COUNTER_QUIET = 4,
	/* The kernel's TLS check (sni.h): first flights judged, and refused
	 * (in audit mode: would have been). Apart from COUNTER_DENIED, as
	 * the user-space verifier's counts are. */
	COUNTER_NAME_CHECKED = 5,
	COUNTER_NAME_REFUSED = 6,
	COUNTER_MAX = 7,
};

/* Per-CPU counters of one session (no atomics on the allowed path),
 * indexed by enum sluice_counter. */
struct counters {
	__u64 n[COUNTER_MAX];
};

/* LPM key: data follows prefixlen immediately, so the session id is two
 * u32 halves (a u64 would leave 4 padding bytes inside the matched data).
 * prefixlen = 64 (session) + address bits; addresses are 16 bytes, IPv4 as
 * ::ffff:a.b.c.d, so v4, v6 and v4-mapped v6 share one trie. */
struct cidr_key {
	__u32 prefixlen;
	__u32 session_lo;
	__u32 session_hi;
	__u8 addr[16];
};

/* Key of a learned IP (filled by the DNS resolver). */
struct learned_key {
	__u64 session;
	__u8 addr[16];
};

/* expires is CLOCK_BOOTTIME nanoseconds (bpf_ktime_get_boot_ns), so a
 * suspended laptop does not keep stale answers alive. */
struct learned_value {
	__u64 expires;
};

/* event.hook */
enum sluice_hook {
	HOOK_CONNECT4 = 1,
	HOOK_CONNECT6 = 2,
	HOOK_SENDMSG4 = 3,
	HOOK_SENDMSG6 = 4,
	HOOK_SOCK_CREATE = 5,
	HOOK_SETSOCKOPT = 6,
	HOOK_EGRESS = 7,
	HOOK_UNIX_CONNECT = 8, /* connect() of a stream/seqpacket or datagram unix socket */
	HOOK_UNIX_SEND = 9,    /* sendmsg() of a datagram unix socket to a named peer */
	HOOK_TLS = 10,         /* the first flight of a TLS connection to a learned address (sni.h): a name_event */
	HOOK_HTTP = 11,        /* the request head of an HTTP connection to a learned address (sni.h): a name_event */
};

/* event.reason */
enum sluice_reason {
	REASON_NOT_ALLOWED = 1,  /* destination not in the session's allowlist */
	REASON_NO_SESSION = 2,   /* process in the sluice cgroup but no session policy */
	REASON_EXPIRED = 3,      /* learned from DNS, but the answer's TTL ran out */
	REASON_SOCKET_TYPE = 4,  /* only TCP and UDP sockets are allowed */
	REASON_SOURCE_ROUTE = 5, /* source routing could steer past the connect hook */
	REASON_FOREIGN_LISTENER = 6, /* another session's sluice proxy or resolver */
	REASON_LOOPBACK_PORT = 7,    /* loopback "session": not the session's listener nor a listed port */
	REASON_PORT = 8,             /* allowed address, but not this port: event.arg0 is the port rule's id */
	/* Name verification (verify.h): numbered apart from the other reasons. */
	REASON_QUIC = 20,            /* UDP 443 to a learned address: QUIC hides the name it is for */
	REASON_VERIFY_UNAVAILABLE = 21, /* the connection could not be handed to the session's verifier */
	/* The kernel's own check of TLS on a learned address
	 * (sni.h): the SNI of the first ClientHello, judged in sk_msg. */
	REASON_SNI = 22,         /* the SNI names no allowed name (name_event.name) */
	REASON_NO_SNI = 23,      /* a ClientHello without SNI */
	REASON_ECH = 24,         /* an Encrypted ClientHello: its inner SNI is hidden */
	REASON_NOT_TLS = 25,     /* the first bytes are not one TLS record holding a whole ClientHello */
	REASON_SNI_LONG = 26,    /* an SNI longer than SNI_NAME_MAX - 1 bytes */
	REASON_FASTOPEN = 27,    /* TCP Fast Open data would leave before the name is judged */
	REASON_ULP = 28,         /* a TCP ULP (kTLS) before the name is judged */
	/* The kernel's check of HTTP (sni.h), HOOK_HTTP events;
	 * REASON_SNI (the name is not allowed) and REASON_SNI_LONG too. */
	REASON_NOT_HTTP = 29,    /* not a whole HTTP/1 request head the check reads (sni.c says which forms) */
	REASON_NO_HOST = 30,     /* a request head without a Host header */
	REASON_HOSTS = 31,       /* more than one Host header */
	REASON_NO_NAME = 32,     /* a strict socket's first flight is neither a TLS ClientHello nor an HTTP/1 request */
};

/* event.flags */
enum sluice_event_flag {
	EVENT_AUDIT = 1, /* allowed because the session is in audit mode */
	EVENT_SCOPED = 2, /* an unlisted abstract name left to the session's Landlock scope */
};

/* One deny (or would-deny) decision. Allowed connects never produce one. */
struct event {
	__u64 ts;      /* CLOCK_BOOTTIME ns */
	__u64 cgroup;  /* session cgroup id */
	__u32 pid;     /* tgid */
	__u32 tid;
	__u32 uid;
	__u8 hook;
	__u8 reason;
	__u8 flags;
	__u8 family; /* AF_INET or AF_INET6 of the judged address (v4-mapped: AF_INET) */
	__u16 port;  /* host byte order */
	__u8 proto;  /* IPPROTO_* */
	__u8 pad;
	__u8 addr[16];
	__s32 arg0; /* sock_create: family; setsockopt: level */
	__s32 arg1; /* sock_create: type;   setsockopt: optname */
	__s32 arg2; /* sock_create: protocol; setsockopt: optlen */
	char comm[16];
};

/* A unix socket name as the caller passed it to connect() or sendmsg():
 * pathname names end at their first NUL; abstract names are the bytes after
 * the leading NUL, NULs included. Bytes after len are zero. */
struct unix_key {
	__u64 session;
	__u8 abstract;
	__u8 pad[3];
	__u32 len;
	char path[112]; /* UNIX_PATH_MAX and room for a terminating NUL */
};

/* unix_allowed values */
enum sluice_unix_verdict {
	UNIX_ALLOWED = 1, /* listed: the allowlist, the built-in list, the API socket */
	UNIX_QUIET = 2,   /* refused without an event: name services glibc asks on every lookup */
};

/* A loopback port a session in loopback "session" mode may reach. */
struct port_key {
	__u64 session;
	__u32 port; /* host order */
	__u32 pad;
};

/* loopback_ports values */
enum sluice_port_kind {
	PORT_LISTED = 1, /* loopback_ports */
	PORT_BOUND = 2,  /* bound by a process of the session (post_bind4/6) */
};

/* Port rules (allowlist "ports"). A rule is a per-session id; 0 means
 * every port and is never stored. cidr_ports (LPM, keyed like cidrs) and
 * learned_ports (keyed like learned) hold the rule of an allowed prefix or
 * learned address, in maps of their own so that the cidrs and learned
 * layouts, and so pins of older builds, stay as they were; they are looked
 * up only for sessions with SESSION_PORT_RULES. A learned address without
 * a learned_ports entry allows every port (the kernel DNS path learns only
 * names without ports, and deletes the entry when it learns). */
struct port_rule_key {
	__u64 session;
	__u32 rule;
	__u32 proto; /* IPPROTO_TCP or IPPROTO_UDP */
};

/* Bit p of the bitmap: port p (host order) is allowed. */
struct port_bitmap {
	__u64 bits[1024];
};

/* A unix-socket denial: the event, then the name. */
struct unix_event {
	struct event e;
	__u8 abstract;
	__u8 pad[3];
	__u32 len;
	char path[112];
};

/* The names a session's TLS connections to learned addresses may carry
 * (sni.h): an LPM trie over the session id and the name reversed, so
 * that one lookup finds an exact entry (the reversed name and a NUL) or a
 * wildcard's (the reversed domain and a dot: *.example.com is
 * "moc.elpmaxe.", which never matches example.com itself). prefixlen is
 * in bits of data, the session's 8 bytes included. */
#define SNI_NAME_MAX 128
#define MAX_SNI_NAMES (64 * 1024)

struct sni_key {
	__u32 prefixlen;
	__u8 data[8 + SNI_NAME_MAX]; /* session id (host order bytes), name reversed, NULs after */
};

/* A refusal of the kernel's name check: the event (hook HOOK_TLS or
 * HOOK_HTTP), then the SNI or Host it read, reversed as the key holds it
 * (len bytes; none when no name was read). */
struct name_event {
	struct event e;
	__u32 len;
	__u32 pad;
	char name[SNI_NAME_MAX];
};

#endif

/* ---- The kernel DNS path (kdns.h, issue 13) ---- */

#define KDNS_MAX_SESSIONS MAX_SESSIONS
#define KDNS_MAX_NAMES (64 * 1024)
#define KDNS_MAX_QUERIES (16 * 1024)
#define KDNS_MAX_LEARNED_FROM (4 * 1024)
#define KDNS_RINGBUF_SIZE (256 * 1024)
#define KDNS_MSG_MAX 512 /* bytes of a message an event carries */

/* kdns_session.flags */
#define KDNS_ON 1 /* UDP DNS of the session goes to its upstream */
/* ...only while the session's resolver has no UDP socket on its port
 * (--dns-path auto): the kernel path is the resolver path's failover. */
#define KDNS_FAILOVER 2

/* A session's kernel DNS path, keyed by cgroup id. Addresses and ports in
 * network order; up4 == 0: no IPv4 upstream; up6 all zero: none. TTLs in
 * seconds. */
struct kdns_session {
	__u32 flags;
	__u32 up4;
	__u32 up6[4];
	__u16 port4;
	__u16 port6;
	__u32 min_ttl;
	__u32 max_ttl;
	__u32 grace;
	__u32 max_ips;
	__u32 pad;
};

/* kdns_name.flags */
#define KDNS_NAME_EXACT 1        /* the name itself is allowed */
#define KDNS_NAME_WILD 2         /* names strictly under it are allowed */
#define KDNS_NAME_EXACT_PRIVATE 4 /* ...with allow_private */
#define KDNS_NAME_WILD_PRIVATE 8

/* An allowed name (or wildcard's domain), keyed by session and a 64-bit
 * FNV-1a hash of its lower-case wire form taken from the last byte to the
 * first. The hash is unkeyed, so a match is confirmed by comparing bytes. */
struct kdns_name_key {
	__u64 session;
	__u64 hash;
};

struct kdns_name {
	__u32 flags;
	__u32 len; /* of the wire form, root label included */
	__u8 name[256];
};

/* A query in flight, keyed by the socket's cookie and the query ID. */
struct kdns_query_key {
	__u64 cookie;
	__u32 id;
	__u32 pad;
};

/* kdns_query.state */
#define KDNS_Q_KERNEL 1 /* the kernel judges the answer */
#define KDNS_Q_USER 2   /* user space answers: the answer passes unjudged */

struct kdns_query {
	__u64 session;
	__u64 ts; /* CLOCK_BOOTTIME ns */
	__u32 upstream[4]; /* IPv4 as ::ffff:a.b.c.d */
	__u16 uport;       /* network order */
	__u8 state;
	__u8 allow_private;
	__u16 qtype;
	__u16 name_len;
	__u8 name[256]; /* lower case wire form */
};

/* kdns_event.kind */
#define KDNS_EV_QUERY 1  /* a query the kernel did not pass: answer it */
#define KDNS_EV_ANSWER 2 /* an answer the kernel could not judge: msg is its start */

/* kdns_event.why */
enum kdns_why {
	KDNS_WHY_NOT_LISTED = 1,
	KDNS_WHY_NOT_CANONICAL = 2,
	KDNS_WHY_QTYPE = 3,
	KDNS_WHY_TRUNCATED = 4,
	KDNS_WHY_RECORDS = 5, /* an owner, type or section it does not judge */
	KDNS_WHY_PRIVATE = 6,
	KDNS_WHY_TTL = 7,     /* above the session's maximum: needs clamping */
	KDNS_WHY_CAP = 8,
	KDNS_WHY_MAP_FULL = 9,
	KDNS_WHY_TOO_BIG = 10,
	KDNS_WHY_SEGMENTED = 11, /* a GRO answer or GSO query: several datagrams in one skb */
};

struct kdns_event {
	__u64 session;
	__u64 cookie;
	__u8 kind;
	__u8 why;
	__u8 family; /* of the datagram: AF_INET or AF_INET6 */
	__u8 pad;
	__u16 len;   /* bytes of msg used */
	__u16 client_port;   /* host order */
	__u8 client[16];     /* the asking socket's address, IPv4 as ::ffff:a.b.c.d */
	__u8 upstream[16];
	__u16 upstream_port; /* host order */
	__u16 pad2;
	__u32 pid;
	__u8 msg[KDNS_MSG_MAX];
};

/* ---- Name verification on learned addresses (verify.h, issue 18) ---- */

#define VERIFY_MAX_PENDING (16 * 1024)

/* A session whose name-checked TCP connections go to its verifier, keyed
 * by cgroup id: the verifier's loopback ports (network order) on
 * 127.0.0.1 and ::1 of the session's network namespace; port6 == 0 sends
 * IPv6 connections to ::ffff:127.0.0.1. */
struct verify_session {
	__u16 port4;
	__u16 port6;
	__u32 flags; /* unused, zero */
};

/* verify_addrs values: how a learned address is judged when an entry with
 * "verify" taught it. Without a value: TCP ports 80 and 443 by name, every
 * other port by address, UDP 443 (QUIC) refused. */
enum sluice_verify_mode {
	VERIFY_NAME = 1,    /* every TCP port by name */
	VERIFY_ADDRESS = 2, /* by address, QUIC included */
};

/* Where a name-checked connection meant to go, and who made it: kept in
 * the socket's storage at connect, copied into verify_pending (keyed by
 * the loopback address and port it connects from) when its SYN leaves. */
struct verify_orig {
	__u32 ip[4]; /* network order, IPv4 as ::ffff:a.b.c.d */
	__u16 port;  /* network order */
	__u16 pad;
	__u32 pid;
	__u64 cgroup;
	char comm[16];
};

/* Key of verify_pending: the session and the client end of the redirected
 * connection, as the verifier's accept sees its peer. */
struct verify_key {
	__u64 session;
	__u8 addr[16]; /* IPv4 as ::ffff:a.b.c.d */
	__u32 port;    /* host order */
	__u32 pad;
};
