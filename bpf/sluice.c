// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)

//go:build ignore

/* sluice datapath: cgroup hooks that let a session's processes reach only
 * loopback, the session's CIDRs and the IPs its DNS resolver learned.
 *
 * All programs attach once, to the sluice parent cgroup; a session is found
 * by the cgroup id of the calling task. A task in the sluice hierarchy with
 * no session entry is treated as a session with an empty policy: the
 * datapath fails closed. Allowed connects produce no event (an event per
 * connect measured +70% on this machine kind), only per-CPU counters. */

/* Two compilation units, two objects. This one (loader/sluice_bpfel.o)
 * holds every program family but the kernel DNS path's, one file each:
 * the shared maps and helpers in common.h, the kernel DNS path's maps in
 * kdns.h (its connect, sendmsg and recvmsg programs redirect DNS there,
 * dns_redirect.h), name verification's in verify.h, and the programs in
 * the files below. The kernel DNS path's parsers, judges and programs are
 * kdns.c, the second unit (loader/kdns_bpfel.o): the loader loads this
 * object first and hands its maps to that one (the maps of both come from
 * the same headers, so they agree), and sluice_egress reaches
 * sluice_kdns_egress by a tail call through kdns_tail, a program array of
 * this object. The loader's pins are the maps' and links' names, which do
 * not depend on how the source is cut. */

#include "common.h"
#include "kdns.h"
#include "dns_redirect.h"
#include "verify.h"
#include "sni.h"

#include "connect.c"
#include "recvmsg.c"
#include "sock.c"
#include "egress.c"
#include "bind.c"
#include "unix.c"
#include "verify.c"
#include "sni.c"
