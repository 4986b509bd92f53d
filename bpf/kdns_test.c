// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* Fuzz targets of the kernel DNS path's parsers (loader/kdnstest): the
 * kernel DNS path's compilation unit (kdns.c) plus two programs that run
 * the egress and ingress judges through BPF_PROG_TEST_RUN, whose dummy
 * socket was never redirected, for a fixed session and socket cookie 0.
 * Never attached. */

#include "kdns.c"

#define KDNS_TEST_SESSION 0x8000000000006b64ULL /* no cgroup has this id */

SEC("cgroup_skb/egress")
int kdns_test_egress(struct __sk_buff *skb)
{
	return kdns_egress_judge(skb, KDNS_TEST_SESSION, 0);
}

SEC("cgroup_skb/ingress")
int kdns_test_ingress(struct __sk_buff *skb)
{
	return kdns_ingress_judge(skb, KDNS_TEST_SESSION, 0);
}
