// SPDX-License-Identifier: Apache-2.0

// Package landlock confines one command on Linux without root and without
// BPF: a Landlock ruleset lets connect(2) reach only a few TCP ports (the
// session proxy's, and loopback ports the policy allows), and a seccomp
// filter refuses every socket Landlock does not govern. sluice points the
// command at its allowlist proxy (HTTP_PROXY and friends); this package is
// what makes a program that ignores those variables fail fast instead of
// going around the proxy.
//
// It lives in userspace/ with the other backends of the modes without BPF
// (userspace/seatbelt, userspace/wfp): what it adds to the sandbox's
// primitives is the mode, for a machine where the cgroup datapath cannot
// load.
//
// # How it is applied
//
// sluice runs the command through a re-exec shim,
//
//	sluice __confine --connect-port P [--connect-port Q ...] -- CMD ARGS
//
// whose only work is to call [Exec]. Exec confines the calling process just
// before execve(2), so the command never runs unconfined, and everything it
// starts inherits the confinement (Landlock domains and seccomp filters
// survive fork and exec and cannot be removed). [Rules.Args] and
// [ParseArgs] are the two ends of that command line.
//
// Exec, in this order: resolves CMD on the PATH of the environment it was
// given and assembles the seccomp program (so that no mistake can leave a
// half-confined process behind), locks the goroutine to its OS thread, sets
// no_new_privs (required by both Landlock and unprivileged seccomp, and it
// makes setuid binaries powerless), creates a ruleset whose only handled
// access is LANDLOCK_ACCESS_NET_CONNECT_TCP with one rule per allowed port,
// restricts itself, installs the seccomp filter and calls execve.
//
// Decisions:
//
//   - Only connecting is handled. Binding and listening stay allowed, so
//     development servers work; nothing outside can reach them unless
//     something on the machine connects to them.
//   - Landlock and no_new_privs apply to the calling thread; the Go runtime
//     has other threads, but execve replaces the whole process with the
//     calling thread's credentials, so the OS thread is locked and the
//     filter is installed without SECCOMP_FILTER_FLAG_TSYNC. If Exec returns
//     an error after it started confining, that thread stays confined and
//     locked: the caller should report the error and exit.
//   - The ruleset attribute passed to the kernel is the ABI 4 prefix of
//     struct landlock_ruleset_attr (handled_access_fs, handled_access_net):
//     every kernel with network rules accepts it, and the call does not
//     change meaning when golang.org/x/sys grows its copy of the struct.
//   - Net rules need Landlock ABI 4 (Linux 6.7). With less, [Available]
//     says why and Exec refuses to run the command: never a silent
//     downgrade.
//
// The seccomp filter is sandbox/seccomp's TCPOnly (its package
// documentation says what it refuses and why): socket(2) only for AF_UNIX,
// AF_NETLINK and TCP over AF_INET/AF_INET6, no TCP Fast Open, no io_uring,
// and a process of another system call ABI dies. The Landlock ruleset is
// sandbox.RestrictConnect. This package is the mode that puts the two
// together with the proxy's port; the primitives live in the sandbox room,
// beside the ones every BPF session's command runs under.
//
// # What this tier cannot do
//
// Say it plainly to users choosing it:
//
//   - Landlock filters TCP ports, not addresses. A program may connect to
//     ANY address on an allowed port: a remote host that listens on the
//     proxy's port number, or on a loopback port the policy allows, is
//     reachable directly. Choosing the proxy's port at random makes that
//     unlikely by accident, not impossible on purpose.
//   - There is no UDP at all, so no DNS from the program: getaddrinfo fails
//     for every name not in /etc/hosts. Names are resolved by the proxy
//     (HTTP CONNECT, or SOCKS5 with remote resolution). QUIC/HTTP/3, NTP,
//     mDNS and ping fail too.
//   - Refusals happen in the program (EACCES from connect, EPERM from
//     socket); there are no kernel audit events. The audit trail is the
//     proxy's.
//   - Local IPC is open: Unix sockets (abstract or not) reach helpers that
//     run outside the sandbox and may connect on the program's behalf — the
//     user's systemd (`systemd-run --user`), D-Bus services, docker.sock, an
//     ssh-agent. Landlock's abstract-socket scope (ABI 6) is not used: it
//     would break X11 and friends without closing path-named sockets.
//   - There is no filesystem confinement here: the program can write files
//     that unconfined processes later run (shell start-up files, git hooks).
//   - Sockets that enter from outside are not re-checked: a descriptor
//     passed over a Unix socket (SCM_RIGHTS) or inherited already connected
//     keeps working. sluice passes the command only its standard streams.
//   - 32-bit and x32 programs die (SIGSYS) on their first system call.
//   - The port list is also what keeps sessions apart: another session's
//     proxy on loopback is unreachable unless its port happens to be listed.
//   - The allowlist's port rules ("ports") are the proxy's to enforce, not
//     this ruleset's: a Landlock rule for an entry's port 5432 would open
//     5432 on every address, not on the entry's. Connect stays limited to
//     the proxy and loopback, and the proxy refuses a port outside the
//     entry's rule (403).
package landlock
