// SPDX-License-Identifier: Apache-2.0

// Package seccomp holds sluice's seccomp filters, the one assembler they
// are written with, and the call that installs one. Every session's
// command runs under one of them:
//
//   - [Families], BPF mode's: socket(2) only for the families the cgroup
//     datapath judges or that stay on the machine (AF_UNIX, AF_NETLINK,
//     AF_INET, AF_INET6); the rest get EAFNOSUPPORT.
//   - [TCPOnly], Landlock mode's (package userspace/landlock): Landlock
//     governs TCP connects only, so every other way onto the network is
//     refused.
//   - [NoUserNamespaces], for a session without process isolation: no new
//     user namespaces, in which it could mount over allowed socket names.
//
// The programs are classic BPF built with golang.org/x/net/bpf, from Linux
// UAPI values spelled out here (checked against golang.org/x/sys/unix by a
// Linux test), so that they assemble and are unit-tested in its VM on any
// OS. Jumps name labels; the assembler turns them into the relative
// offsets classic BPF wants.
//
// Rules every program keeps:
//
//   - A system call from another ABI than the native one (i386 on amd64,
//     arm32 on arm64, and amd64's x32, which shares AUDIT_ARCH_X86_64 but
//     sets bit 30 of the number) kills the process: those ABIs have other
//     numbers, and i386's socketcall(2) hides its arguments in memory where
//     a filter cannot read them.
//   - Only the low 32 bits of an argument are compared, because the kernel
//     reads these int arguments as 32-bit values: garbage in the upper half
//     changes nothing, for the kernel or for the filter.
//   - The filter goes on the calling thread without
//     SECCOMP_FILTER_FLAG_TSYNC: the Go runtime has other threads, but the
//     callers exec next, and execve replaces the whole process with the
//     calling thread, its filters with it.
//
// TCPOnly, in detail:
//
//   - socket(2) is allowed for AF_UNIX, AF_NETLINK (glibc's getaddrinfo and
//     getifaddrs use NETLINK_ROUTE; netlink does not leave the machine) and
//     for AF_INET/AF_INET6 only when the type is SOCK_STREAM and the protocol
//     is 0 or IPPROTO_TCP. Everything else gets EPERM: UDP, ICMP ping
//     sockets, raw and packet sockets, and also MPTCP and SCTP, which are
//     SOCK_STREAM but not TCP, so Landlock (since its erratum 1 fix) does not
//     govern them. Measured on Linux 6.18 (ABI 7): under a ruleset allowing
//     port 1 only, an IPPROTO_MPTCP socket connected to a loopback listener
//     on another port.
//   - sendto, sendmsg and sendmmsg with MSG_FASTOPEN get EOPNOTSUPP: TCP Fast
//     Open connects inside sendmsg(2), which Landlock does not check
//     (landlock-lsm/linux#41; measured here: a MSG_FASTOPEN sendto reached a
//     port the ruleset did not allow). EOPNOTSUPP is what the kernel answers
//     when client TFO is switched off, so programs fall back to connect(2),
//     which Landlock checks. TCP_FASTOPEN_CONNECT needs no rule: it still
//     goes through connect(2).
//   - io_uring_setup gets EPERM: io_uring can create sockets and send
//     without the system calls above (Families refuses it for the same
//     reason).
//   - Everything else is allowed, including socketpair(2), accept(2) and
//     send on connected stream sockets.
package seccomp
