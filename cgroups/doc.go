// SPDX-License-Identifier: Apache-2.0

// Package cgroups puts sluice sessions into cgroup v2: it finds the cgroup2
// mount, keeps a root-owned parent cgroup with one child per session, applies
// limits, spawns the confined command straight into its session, and kills and
// removes sessions.
//
// The cgroup is the unit the datapath enforces on: the sock_addr programs are
// attached to the parent, and bpf_get_current_cgroup_id tells them which
// session a connect came from (Session.ID is that id). So the decisions below
// are about making membership in a session cgroup impossible to leave.
//
// # One root-owned parent, one child per session
//
// Attaching the programs once to a parent (Root) covers every session below
// it, including sessions created later, and a crashed daemon leaves the
// parent and its pinned programs in place rather than a confined process in
// an unconfined cgroup. The parent is created 0755 and owned by root, so no
// unprivileged process can create, move into, or remove cgroups under it; an
// existing parent owned by anyone else is refused, because its owner could be
// delegated control of the tree. Each session is a leaf: its processes live in
// it directly, and no controllers are enabled in its subtree, which is what
// CLONE_INTO_CGROUP requires.
//
// The cgroup2 mount is found in /proc/self/mountinfo and checked with statfs;
// nothing assumes /sys/fs/cgroup, because hybrid machines mount cgroup2 at
// /sys/fs/cgroup/unified. OpenRoot tries to enable the pids and memory
// controllers for sessions. On a hybrid layout they are usually bound to
// cgroup v1 and cannot serve cgroup2 at the same time; that is not an error:
// Root.Controllers says what is usable, and the limit setters return an error
// wrapping ErrControllerUnavailable that says why.
//
// # No moment unconfined
//
// Session.Start uses clone3(CLONE_INTO_CGROUP) (os/exec's
// SysProcAttr.UseCgroupFD), so the child is born inside the session: there is
// no window between fork and "write pid to cgroup.procs" in which it could
// connect unconfined, and no helper process to trust.
//
// # Never uid 0
//
// Start refuses uid 0. A root process can write its pid into any cgroup.procs
// outside the session (or create a sibling cgroup) and leave the enforcement
// behind, and it can detach the BPF programs. Sluice runs the confined command
// as an ordinary user; LookupUser resolves "USER[:GROUP]" for the caller.
//
// # no_new_privs and capabilities
//
// The confined command must not gain privileges through a setuid binary or
// file capabilities after it starts. Go's SysProcAttr has no NoNewPrivs field,
// and prctl(PR_SET_NO_NEW_PRIVS), the capability bounding set and the ambient
// set are per-thread attributes inherited by a child at clone time. Start
// therefore sets them on a goroutine locked to its OS thread, calls
// cmd.Start from that goroutine, and never unlocks the thread, so the Go
// runtime discards it when the goroutine exits instead of reusing a thread with
// an empty bounding set for unrelated work. (The runtime already refuses to
// clone new threads from a locked thread, so the taint does not spread. It
// cannot end the main thread, only park it, so Start never uses that one.) The
// child then switches to the target uid, which drops its permitted and
// effective capabilities because keep-caps is off, and executes with
// no_new_privs set and empty bounding, ambient and inheritable sets.
//
// Because the creating thread ends at once, Start refuses SysProcAttr
// settings tied to that thread (Pdeathsig, Ptrace), and settings that would
// hand back privileges (preset credentials, ambient capabilities, a new user
// namespace).
//
// # Preparing the child's namespaces
//
// StartWith runs a caller's step on the spawning thread just before the
// clone, as root: the child is born in whatever per-thread state it sets
// up (the session sandbox's mount namespace, package sandbox), and since
// the thread is discarded, nothing else in the process ever runs in it.
//
// # Writing to cgroupfs
//
// Every cgroupfs file is opened relative to the cgroup2 mount with openat2
// RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV
// where the kernel has it (plain open with O_NOFOLLOW before 5.6), and the
// result is checked to be on cgroup2 with fstatfs. Errors name the file and,
// for writes, the data written.
//
// # Platforms
//
// Everything that touches the kernel is Linux-only. The parsers (ParseMountInfo,
// ParseSize, the USER[:GROUP] syntax) are platform-free. On other systems the
// constructors return an error wrapping ErrNotSupported.
package cgroups
