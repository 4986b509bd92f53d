// SPDX-License-Identifier: Apache-2.0

// Package loader is the Go face of sluice's kernel datapath (bpf/sluice.c,
// a file per program family, and bpf/kdns.c, the kernel DNS path's own
// compilation unit):
// it loads the programs, pins maps and links under a root-only bpffs
// directory, attaches them with bpf_link to the sluice parent cgroup,
// re-opens the pinned objects after a restart, verifies that the programs
// are in force for a session's cgroup before anything is spawned into it,
// and offers typed accessors for the maps and the event ring buffers.
//
// Decisions:
//   - Links and maps are pinned. An unpinned link detaches when its process
//     exits, so a crash of sluice would fail open; a pinned link keeps
//     enforcing and a later process re-opens it and swaps in its programs
//     with an atomic link update.
//   - One attachment serves every session: the programs find the session by
//     the calling task's cgroup id. A task in the sluice hierarchy with no
//     session entry gets an empty policy (loopback only): fail closed. The
//     exception is the kernel DNS path's two cgroup_skb programs (below).
//   - Each session has its own event ring buffer (a hash of maps keyed by
//     cgroup id), so several `sluice run`s reading events at once never
//     steal each other's.
//   - Addresses are stored as 16 bytes, IPv4 as ::ffff:a.b.c.d, so IPv4,
//     IPv6 and IPv4-mapped IPv6 destinations share one key space and the
//     mapped form is judged by the IPv4 rules.
//   - Two objects: the datapath (sluice_bpfel.o) declares every pinned map
//     and holds every program but the kernel DNS path's, which are a second
//     object (kdns_bpfel.o) so that the path's thousand lines of parsers
//     and judges are a unit of their own. Open loads the datapath, then the
//     kernel DNS object with the datapath's maps in its place
//     (MapReplacements): the two share every pinned map, one kernel object
//     each, so the pins and their names are what one object had. A kernel
//     that refuses the second object keeps the first (KDNSSupported says
//     why). The pinned hash (meta) covers both objects.
//   - The kernel DNS path (bpf/kdns.h, kdns.c, kdns_linux.go) is off unless a
//     session has a kdns_sessions entry: its programs then judge only
//     datagrams between a redirected UDP socket and the session's upstream.
//     Its ingress program is attached per session, to the own cgroup of
//     each session on that path (AttachKDNS; cgroup links are multi-attach,
//     so it runs after the parent's), and its egress program is a tail call
//     of the parent's egress program (kdns_tail), not attached to the
//     parent as programs of their own:
//     there they ran on every packet of every session, and a TCP
//     connect+close cycle to an allowed address paid 1.12-1.13x instead of
//     1.065x unconfined for programs that, on the default resolver path,
//     only look up a missing map entry. The links are pinned per session
//     (kdns_egress_<cgroup id>, kdns_ingress_<cgroup id>) so the kernel
//     path keeps working while no sluice process runs, and the programs
//     themselves are pinned (prog_kdns_*) so that a process that re-opens
//     the datapath without loading it can attach them to new sessions; a
//     fresh load swaps its programs into the existing session links.
//     ClearKDNS (and so RemoveSession) unpins a session's links, SetKDNS
//     refuses a session without them, and Verify requires them for a
//     session with a kdns_sessions entry (or pinned links) only. Links that
//     earlier builds pinned on the parent (link_kdns_*) are unpinned by Open.
//     Allowed names are keyed by an unkeyed FNV-1a hash and confirmed byte
//     by byte; SetKDNS refuses two names of one session with one key
//     (ErrKDNSCollision) rather than let one shadow the other. Its new maps
//     live beside the old ones (no existing layout changed), so pins of an
//     older build stay compatible. ForgetExpired and SweepLearned never cut
//     an entry the kernel extended since user space learned it.
//   - Unix sockets are judged by name in cgroup connect_unix and
//     sendmsg_unix (Linux 6.7+; optional: older kernels load the rest of
//     the datapath and UnixJudging says why not). Exact names are one hash
//     lookup keyed by (session, abstract, length, name); globs are matched
//     in the kernel by a bpf_loop matcher, only when the exact lookup
//     missed, so that they also cover sockets created after the session
//     started (expanding them in user space at start would not). A name is
//     not an inode: docs/design.md ("Unix sockets") says what that leaves
//     open and why the peer-judging alternative (fmod_ret on the LSM unix
//     hooks) is not used. Measured on the test VM (2 vCPUs, 6.18, load
//     average 12 from other work; TestUnixConnectCost with UNIX_BENCH=1,
//     the kernel's own program statistics): connect_unix runs 164 ns per
//     call for an exactly listed name and 406 ns for a name matched by the
//     second of two globs; in wall time a unix connect+close (~15 us here)
//     moved by 1.04-1.08x, within the noise of that machine.
//   - Loopback "session" mode costs sessions in the default mode one
//     inlined array lookup (loopback_strict), and a session lookup only
//     after a strict session was registered on the machine: the mark is
//     never cleared, since clearing it would race with other processes
//     registering strict sessions.
//   - The datapath's vocabulary (hooks, reasons, counters, session and
//     event flags, the event record) is generated from bpf/sluice.h by
//     bpf2go -type (gen.go), never copied by hand, and that generated file
//     builds on every OS so the platform-free event model can use it. The
//     object is committed; `make check-generate` (run by CI) fails when it
//     or its Go is not what the committed source generates.
package loader
