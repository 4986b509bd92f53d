// SPDX-License-Identifier: Apache-2.0

// Package exitstatus keeps a session command's exit status where the next
// daemon finds it.
//
// A daemon learns a command's exit status by waiting for its child. When
// the daemon dies (kill -9, systemctl restart, docker restart) the command
// goes on, confined, but its exit status would go to whichever process
// reaps it, and the `sluice run` that waits for it could only guess. So
// in daemon mode the session's first process is a small supervisor (the
// sluice binary itself, see Supervise) that starts the command as its
// child, forwards signals to it, and writes its status into a file that
// the daemon opened for it in the state directory before the spawn. The
// file survives the daemon; the daemon that re-adopts the session reads it
// once the session's cgroup is empty.
//
// Why a file the daemon opens, and not one the supervisor creates: the
// supervisor runs as the session's user, with no privileges, and the
// state directory is root's. The supervisor writes through the descriptor
// it was given, and makes itself non-dumpable first, so the command (same
// uid) can neither ptrace it nor take the descriptor with pidfd_getfd and
// fill the file. The command could still kill the supervisor: then the
// command dies too (parent-death signal) and the status is "unknown",
// which is what a daemon reports for a session whose status file is
// empty.
//
// Why not the alternatives: ptrace-attaching the command from the new
// daemon (PTRACE_O_TRACEEXIT) loses every status that arrives while no
// daemon runs, and takes the command's one tracer slot (strace -p, gdb);
// a BPF tracepoint on process exit would work without a supervisor, but
// ties the exit status to the datapath's program set.
package exitstatus
