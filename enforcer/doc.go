// SPDX-License-Identifier: Apache-2.0

// Package enforcer ties the pieces of kernel enforcement into sessions: it
// opens the sluice cgroup root and the pinned datapath, creates a session
// (a cgroup plus its policy in the datapath), spawns the confined command
// into it only after verifying that the programs are in force there, and
// tears the session down again. `sluice run` uses it in-process (the
// embedded enforcer); the daemon uses it for all of its sessions.
//
// Decisions:
//   - The policy is written to the datapath before anything is spawned, and
//     the session cgroup exists before the policy: a task can never run in
//     the session with a policy that is still being filled in, and until
//     the session entry exists its tasks reach loopback only.
//   - A session is owned by the process that holds an flock on its lock
//     file under the state directory. When the owner dies (even SIGKILL)
//     its confined processes keep running under the pinned datapath; the
//     next Open reclaims the session only once its cgroup is empty, so
//     leftovers never become unconfined and never accumulate.
//   - There is one way to start a session's command: the caller describes
//     it (CommandSpec) and Session.Start builds and spawns it. The build
//     (command.go) is platform-free and unit-tested: it adds the session's
//     name and proxy variables and routes the command through the
//     socket-family shim. Whatever else confines a session's processes
//     (namespaces, a private /proc, hidden paths) belongs in that builder,
//     so the embedded enforcer and the daemon cannot drift apart.
//   - DNS takes one of two paths (DNSOptions.Path): the session's resolver
//     for every query, or the kernel path (kdns_linux.go), where UDP DNS
//     goes straight to the upstream and the datapath judges queries and
//     learns answers itself; the resolver then answers only what the kernel
//     hands over (refusals, non-canonical queries, answers it cannot judge)
//     and injects the reply through a raw socket in the client's network
//     namespace with the upstream as its source. A session that cannot take
//     the kernel path (no IP upstream, an allowlist hash collision) stays on
//     the resolver's and says why (KernelDNSError). The kernel keeps no
//     cache: an answer must come from the upstream for the kernel to judge
//     it, and cgroup skb programs cannot answer a query themselves, so a
//     cache would mean the user-space hop the path exists to avoid.
package enforcer
