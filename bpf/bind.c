// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* post_bind4/6: loopback "session" mode remembers the ports a session
 * binds, so that it may reach its own listeners. */

#include "common.h"

/* ---- loopback "session" mode: listeners created inside the session ---- */

/* record_bind remembers a port bound by a process of a session in
 * loopback "session" mode, so the session may reach its own listeners.
 * post_bind sees the port the kernel chose for a bind to port 0. */
static __always_inline int record_bind(struct bpf_sock *sk)
{
	__u32 zero = 0;
	__u32 *strict = bpf_map_lookup_elem(&loopback_strict, &zero);

	if (!strict || !*strict)
		return 1;
	struct session *s;
	__u64 cg = session_of(&s);
	if (!s || !(s->flags & SESSION_LOOPBACK_SESSION))
		return 1;
	struct port_key k = {.session = cg, .port = sk->src_port};
	__u8 val = PORT_BOUND;
	/* A full map leaves the port unrecorded: connects to it are then
	 * refused and explained (fail closed). */
	bpf_map_update_elem(&loopback_ports, &k, &val, BPF_NOEXIST);
	return 1;
}

SEC("cgroup/post_bind4")
int sluice_post_bind4(struct bpf_sock *sk)
{
	return record_bind(sk);
}

SEC("cgroup/post_bind6")
int sluice_post_bind6(struct bpf_sock *sk)
{
	return record_bind(sk);
}
