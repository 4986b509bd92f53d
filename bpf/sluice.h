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

/* session.flags */
enum sluice_session_flag {
	SESSION_AUDIT = 1, /* allow everything, report what would be denied */
	SESSION_LOOPBACK_SESSION = 2, /* loopback only to the session's own listeners and listed ports */
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
	__u16 pad;
};

/* Index of a counter in struct counters. */
enum sluice_counter {
	COUNTER_ALLOWED = 0,     /* non-loopback egress allowed */
	COUNTER_DENIED = 1,      /* refused (connect, sendmsg, socket, setsockopt, packet) */
	COUNTER_AUDITED = 2,     /* would have been denied, allowed by --audit */
	COUNTER_EVENTS_LOST = 3, /* ring buffer full */
	COUNTER_MAX = 4,
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
};

/* event.flags */
enum sluice_event_flag {
	EVENT_AUDIT = 1, /* allowed because the session is in audit mode */
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

/* A unix-socket denial: the event, then the name. */
struct unix_event {
	struct event e;
	__u8 abstract;
	__u8 pad[3];
	__u32 len;
	char path[112];
};

#endif
