// SPDX-License-Identifier: Apache-2.0

// Package shim is the process every session's command starts as: the
// hidden subcommand `sluice __families` (Name) that puts itself in the
// session's sandbox and then execs the command in place (same pid, same
// cgroup, same credentials), so the command never runs unconfined and
// everything it starts inherits the confinement.
//
// In this order, on one locked OS thread: the Landlock domain scoped to
// the session (sandbox.RestrictSelf), unless the session shares its
// user's processes; without that domain, which refuses every mount, the
// filter that refuses new user namespaces (sandbox.RefuseUserNamespaces),
// unless the session allows them; then BPF mode's socket-family filter
// (seccomp.Families) and execve. The cgroup datapath judges every inet
// socket, but it does not see other families at all.
//
// Its command line is built by the session's command builder (package
// enforcer, with Args) and read back here (Parse): both ends live in this
// package, so they cannot drift apart. The zero Options are the safe
// ones: every layer on.
//
// With FlagExitFD N first (the daemon's sessions), the shim is the
// session's supervisor instead (Supervise): it runs the shim with the
// rest of its arguments as its child and writes the child's exit status
// to descriptor N, which outlives a daemon restart (package exitstatus).
// The supervisor itself stays outside the command's Landlock domain, so
// the command cannot signal it, while it can forward signals to the
// command.
//
// It lives in the sandbox room because it is where the sandbox is put on:
// cmd/sluice keeps only the cobra command that dispatches to it.
package shim

import (
	"errors"
	"slices"
)

// Name is the hidden subcommand of the sluice binary that runs the shim.
const Name = "__families"

// Flags of the shim's command line.
const (
	// FlagShareProcesses leaves the command without the Landlock domain:
	// it can trace and signal the user's processes outside the session.
	FlagShareProcesses = "--share-processes"
	// FlagAbstractUnix leaves abstract unix sockets outside the session
	// reachable.
	FlagAbstractUnix = "--abstract-unix"
	// FlagAllowUserNamespaces lets a command without the Landlock domain
	// create user namespaces, in which it could mount over the names of
	// allowed unix sockets (seccomp.NoUserNamespaces says why they are
	// refused).
	FlagAllowUserNamespaces = "--allow-userns"
	// FlagExitFD N, before the other arguments, makes the shim the
	// session's supervisor (Supervise).
	FlagExitFD = "--exit-fd"
	// flagPath names the executable, already resolved by the caller.
	flagPath = "--path"
)

// Options is what the shim's command line asks for.
type Options struct {
	// Path is the executable, already resolved by the caller; it is
	// never looked up in PATH.
	Path string
	// Argv is the command line; Argv[0] is the name the program sees.
	Argv []string
	// ShareProcesses leaves out the Landlock domain (FlagShareProcesses).
	ShareProcesses bool
	// AbstractUnix leaves abstract unix sockets outside the session
	// reachable (FlagAbstractUnix).
	AbstractUnix bool
	// AllowUserNamespaces lets a command without the Landlock domain
	// create user namespaces (FlagAllowUserNamespaces).
	AllowUserNamespaces bool
}

// Args is the command line that runs the shim binary self as the shim
// with o: self, Name, the flags, "--", then o.Argv.
func Args(self string, o Options) []string {
	args := []string{self, Name, flagPath, o.Path}
	if o.ShareProcesses {
		args = append(args, FlagShareProcesses)
	}
	if o.AbstractUnix {
		args = append(args, FlagAbstractUnix)
	}
	if o.AllowUserNamespaces {
		args = append(args, FlagAllowUserNamespaces)
	}
	return append(append(args, "--"), o.Argv...)
}

// Parse parses the shim's arguments (after its name): --path PATH, the
// flags above, "--", then the command line. The "--" is required, so that
// a command whose name begins with a dash can never be taken for a flag.
func Parse(args []string) (Options, error) {
	var o Options
	usage := errors.New("usage: " + Name + " " + flagPath + " PATH [" + FlagShareProcesses + "] [" + FlagAbstractUnix + "] [" + FlagAllowUserNamespaces + "] -- ARGV")
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case flagPath:
			if i+1 >= len(args) || o.Path != "" {
				return Options{}, usage
			}
			i++
			o.Path = args[i]
		case FlagShareProcesses:
			o.ShareProcesses = true
		case FlagAbstractUnix:
			o.AbstractUnix = true
		case FlagAllowUserNamespaces:
			o.AllowUserNamespaces = true
		case "--":
			o.Argv = slices.Clip(args[i+1:])
			if o.Path == "" || len(o.Argv) == 0 {
				return Options{}, usage
			}
			return o, nil
		default:
			return Options{}, usage
		}
	}
	return Options{}, usage
}
