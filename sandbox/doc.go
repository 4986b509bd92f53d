// SPDX-License-Identifier: Apache-2.0

// Package sandbox decides what a session's processes may touch besides the
// network: other processes of the same user, and credential files. The
// datapath judges a session's own sockets; an agent that wants out can ask
// another process to do the work instead (take a socket with pidfd_getfd,
// inject code with ptrace, process_vm_writev or /proc/PID/mem), or read a
// token and send it to a host it may reach. Every session's command is
// started by the one command builder in enforcer, which applies this
// package; sessions are sandboxed by default.
//
// # The room
//
// Every confinement primitive a session's processes run under lives here,
// once: this package holds the Landlock domains (RestrictSelf for process
// isolation, RestrictConnect for Landlock mode's TCP ports, ProbeLandlock),
// the mount namespace and what it hides or keeps read-only; sandbox/seccomp
// the seccomp filters and their assembler; sandbox/shim the process every
// session's command starts as (`sluice __families`), which puts the layers
// on in order and execs the command. The modes without BPF
// (userspace/landlock and the other backends) use these primitives and add
// only the mode around them. None of the three depends on a session, the
// daemon or the proxy (cmd/sluice's imports test holds this).
//
// # Process isolation: a Landlock domain and a private /proc
//
// The shim that execs the command (sluice __families) first puts itself in
// a Landlock domain that handles no file or network access (RestrictSelf).
// Any Landlock domain confines ptrace-class access to processes in the same
// domain or below it: ptrace, pidfd_getfd, process_vm_readv/writev, kcmp,
// perf_event_open on another pid, and /proc/PID/{mem,environ,fd,root,...}
// all pass through ptrace_may_access, where Landlock refuses a target
// outside the domain (EPERM/EACCES). ABI 6 (Linux 6.12) adds scopes:
// signals (kill, tgkill, pidfd_send_signal, SIGIO) and abstract unix
// sockets reach only the domain. The command builder (enforcer) asks for
// the abstract-socket scope always where the datapath cannot judge unix
// sockets (before Linux 6.7), and elsewhere unless the session's
// unix_sockets lists an abstract name or the session is in audit mode
// (there the datapath is the one judge of abstract names); with the scope
// the datapath lets unlisted abstract names through to it, so the
// session's own abstract sockets work, and explains its refusals itself. Everything the session starts inherits
// the domain, so gdb, strace, kill and job control work among the
// session's processes and nowhere else.
//
// Visibility comes from the mount namespace Enter builds on the spawning
// thread before the command is cloned: /proc there is a new proc instance
// mounted hidepid=invisible, which lists only processes the reader may
// trace (ptrace_may_access with PTRACE_MODE_READ), so `ps` in a session
// shows the session.
//
// Why not a PID namespace, the suggestion in issue 9: it would need an
// init process in every session (pid 1 ignores signals it has no handler
// for, and must reap orphans), so sluice's shim would have to stay resident
// as init, forward every signal, keep the terminal's foreground process
// group and job control right across itself, and translate a death by
// signal into an exit status; and /proc for a new PID namespace can only be
// mounted from inside it, so root code would have to run in the session
// before dropping to the user. The Landlock domain gives the same refusals
// with the command exec'd in place (same pid, its exit status and signals
// pass through untouched) and no resident process. What a PID namespace
// would add is left open (docs/design.md): pid numbers of outside processes
// (a pid is still probeable with kill(pid, 0), which answers EPERM instead
// of ESRCH), and the few same-uid calls that take a pid without a ptrace
// check (setpriority, sched_setaffinity, ioprio_set, prlimit on another
// process): they can slow a process down, not take its sockets or memory.
//
// Refusals are explained, not silent, where the kernel can say what it
// refused: with Landlock ABI 7 (Linux 6.15) the shim asks for the
// command's refusals to be logged after its exec
// (LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON), and the session's owner reads
// the kernel's audit records (package kaudit) and prints "sluice: denied
// gdb[4242] -> ptrace of bash[1234]: outside the session", with a
// sandbox_denied audit event. The kernel writes them only when the
// machine's audit is on (auditd, audit=1); sluice does not turn it on.
//
// Without Landlock (a kernel before 5.13 or without landlock in lsm=) the
// command builder refuses to start a session with process isolation, and
// says how to opt out; before ABI 6 the shim notes which scopes are missing.
//
// # Hidden paths
//
// In the same mount namespace, every existing path the hidden-path globs
// match (DefaultHiddenPaths, the allowlist file's "hidden_paths", minus
// --show-path) is covered by a read-only, empty file or directory from a
// small tmpfs: reads give nothing, writes fail with EROFS. Paths are
// resolved once, with symlinks followed (the secret is where a link points),
// into O_PATH descriptors, and the cover is moved onto the descriptor
// (open_tree + move_mount), so nothing is resolved twice. The namespace's
// mounts are slaves of the original: mounts made later on the host still
// appear, the session's never leave it. The command cannot undo the covers:
// it has no capabilities, and in a user namespace of its own the covers are
// locked to what they hide (the kernel's MNT_LOCKED).
//
// A daemon builds the namespace from its caller's view: Enter first joins
// the caller's mount namespace through the pidfd taken when it connected
// (which pid reuse cannot redirect), so the session sees the caller's file
// system, not the daemon's service sandbox, and looks up the user's home in
// it.
//
// # Read-only paths
//
// A session may also keep paths as they are for whoever reads them after
// it (a CI runner's downloaded actions, the tools a later step runs):
// ReadOnly binds each onto itself and sets MOUNT_ATTR_RDONLY on it and on
// every mount below it, and binds onto themselves the directories above
// it that the user could rename, so the tree can neither be changed nor
// moved aside for a writable one of the same name. mount_setattr rather
// than MS_REMOUNT per mount: it changes the one flag atomically for the
// whole tree and keeps nosuid, nodev and noexec without reading them back.
// A refused write is EROFS and needs no explanation from the audit
// records.
//
// Why a missing machine path is skipped where the user cannot create it
// but refuses the session where it can, rather than always skip (the
// session could create the path and plant what later readers trust) or
// always refuse (a daemon's list serves callers whose views differ, a
// container's among them, and one absent path would stop them all). A
// session's own path that is missing is a mistake it is told of.
//
// # Unix socket names
//
// The datapath allows unix sockets by the name passed to connect(); the
// kernel follows the name afterwards. Enter holds each allowed name
// (Spec.Sockets) to the socket it names at the start: a name the user
// could replace is bound onto itself, and so is each directory above it
// the user could rename, since a mount point cannot be unlinked or
// renamed in the namespace that has it. Names it cannot hold are reported
// (the command builder then leaves built-in names out of the session).
// A session cannot mount over them: with process isolation its Landlock
// domain refuses every mount in any namespace, and without it the shim
// refuses user namespaces (RefuseUserNamespaces) unless --allow-userns.
// Why not refuse user namespaces always: the Landlock domain already
// makes them harmless here, and Chromium's sandbox needs them.
//
// # A session's own sockets
//
// Programs make and connect to their own unix sockets (Python's
// multiprocessing forkserver, ssh -M -S, tmux, language servers), and the
// datapath cannot tell who bound a name. So Enter gives the session a
// directory only it can fill (Spec.OwnDir, its $TMPDIR), and the datapath
// allows every clean name below it: a fresh tmpfs, owned by the user and
// mode 0700, mounted only in the session's mount namespace on an empty
// directory of root's under OwnDirRoot (which only root can write, so the
// path cannot be renamed or replaced). It is mounted nosymfollow: a
// symlink there is never followed (ELOOP), so it cannot lead to another
// socket; a hard link or rename from another file system into it fails
// (EXDEV); and the session cannot mount over or inside it, as above. A
// name with "." or ".." components or "//", or a relative name, is refused
// by the datapath. The command builder gives no own directory where the
// session could mount (--share-processes --allow-userns).
//
// Why not a private /tmp: it would also catch programs that ignore
// $TMPDIR, but it would hide the user's /tmp (files to work on, X11's
// /tmp/.X11-unix, listed sockets of outside agents) and change what every
// /tmp path means in the session; a separate directory changes nothing
// that worked (docs/design.md, "A session's own sockets").
//
// # Environment
//
// ScrubEnv removes variables named like secrets. It is off by default
// (--scrub-env): an agent usually needs its own API key, which is named
// exactly like the secrets it would remove (ANTHROPIC_API_KEY,
// OPENAI_API_KEY), so on by default it would break the programs sluice is
// for, while hiding files breaks nothing they need.
package sandbox
