// Package loader is the Go face of sluice's kernel datapath (bpf/sluice.c):
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
//     session entry gets an empty policy (loopback only): fail closed.
//   - Each session has its own event ring buffer (a hash of maps keyed by
//     cgroup id), so several `sluice run`s reading events at once never
//     steal each other's.
//   - Addresses are stored as 16 bytes, IPv4 as ::ffff:a.b.c.d, so IPv4,
//     IPv6 and IPv4-mapped IPv6 destinations share one key space and the
//     mapped form is judged by the IPv4 rules.
package loader
