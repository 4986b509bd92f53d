// SPDX-License-Identifier: Apache-2.0

// Package kaudit reads the kernel's audit records of Landlock refusals, so
// that a session's sandbox (package sandbox) is not silent: when the
// session's Landlock domain refuses a ptrace, a pidfd_getfd, a
// process_vm_writev, a write to /proc/PID/mem or a signal to a process
// outside the session, the process that owns the session (the daemon, or
// embedded `sluice run`) turns the kernel's record into a sluice line, an
// audit event and a counter, as it does for the datapath's denials.
//
// # Where the records come from
//
// Since Linux 6.15 (Landlock ABI 7) Landlock writes an AUDIT_LANDLOCK_ACCESS
// record for each refusal (the domain's id, what blocked it, the target
// process) and, with a domain's first refusal, an AUDIT_LANDLOCK_DOMAIN
// record naming the process that created the domain; the audit framework
// adds the SYSCALL record of the refused call (the acting pid, comm, exe and
// syscall) and an EOE record that closes the event. A domain logs refusals
// after an exec only when landlock_restrict_self was given
// LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, which the session's shim passes
// (sandbox.RestrictSelf): the shim execs the command in place.
//
// Reader subscribes to the audit netlink socket's read-only multicast
// group (AUDIT_NLGRP_READLOG, CAP_AUDIT_READ). It coexists with auditd,
// which keeps the unicast channel, and needs no audit rules. Assembler
// groups the records of one event by serial number and hands out a Denial
// when the event's EOE arrives (or, for a refusal without a syscall
// context, when it has waited long enough).
//
// # What sluice does not do
//
// Landlock writes nothing unless the machine's audit is enabled (auditd
// running, or audit=1 on the kernel command line, or auditctl -e 1).
// sluice never enables it: enabling audit gives every new task a syscall
// audit context, a cost on every system call of the machine, and without
// auditd the kernel copies every record (a BPF program load is one) to
// its log. Where audit is off, Status says so, `sluice check` reports the
// refusals as silent, and sessions run as before: refused, unexplained.
//
// Records are read, not asked for: a refusal that the kernel drops
// (audit backlog full, rate limit) or that arrives after the session ended
// is not reported. Attribution is by the acting process's cgroup, read
// when the event is complete (the session's cgroup, as for datapath
// denials), falling back to the domain: the first refusal of a domain
// names its creator, the session's command.
package kaudit
