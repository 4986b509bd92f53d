// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/exitstatus"
	"github.com/sluice-dev/sluice/sandbox"
	"github.com/sluice-dev/sluice/userspace/landlock"
)

// newFamiliesCmd is BPF mode's hidden shim: `__families --path P [flags]
// -- ARGV` puts itself in the session's Landlock domain (unless
// --share-processes, which instead refuses new user namespaces unless
// --allow-userns), installs the socket-family filter and execs P with ARGV.
//
// With `--exit-fd N` first (the daemon's sessions), it stays as the
// session's supervisor instead: it runs `__families` with the rest of its
// arguments as its child and writes the child's exit status to descriptor
// N, which outlives a daemon restart (package exitstatus). The supervisor
// itself stays outside the command's Landlock domain, so the command
// cannot signal it, while it can forward signals to the command.
func newFamiliesCmd() *cobra.Command {
	return &cobra.Command{
		Use:                enforcer.FamiliesShim + " [" + enforcer.ShimExitFD + " N] --path PATH -- ARGV...",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) >= 2 && args[0] == enforcer.ShimExitFD {
				fd, err := strconv.Atoi(args[1])
				if err != nil || fd < 3 {
					return &exitError{code: exitSluiceError, err: fmt.Errorf("%s %q: want a descriptor number", enforcer.ShimExitFD, args[1])}
				}
				if _, err := enforcer.ParseShimArgs(args[2:]); err != nil {
					return &exitError{code: exitSluiceError, err: err}
				}
				return superviseFamilies(os.NewFile(uintptr(fd), "exit-status"), args[2:])
			}
			o, err := enforcer.ParseShimArgs(args)
			if err != nil {
				return &exitError{code: exitSluiceError, err: err}
			}
			// Landlock applies to the calling thread; the exec that
			// follows must happen on the same one.
			runtime.LockOSThread()
			if !o.ShareProcesses {
				missing, err := sandbox.RestrictSelf(sandbox.Scopes{Signal: true, AbstractUnix: !o.AbstractUnix})
				if err != nil {
					return &exitError{code: exitSluiceError, err: err}
				}
				for _, m := range missing {
					fmt.Fprintf(os.Stderr, "sluice: note: this kernel lacks the Landlock %s: the command can still reach outside its session that way\n", m)
				}
			}
			// Without the Landlock domain, which refuses every mount,
			// a user namespace would let the command mount over allowed
			// unix socket names.
			if o.ShareProcesses && !o.AllowUserNS {
				if err := sandbox.RefuseUserNamespaces(); err != nil {
					return &exitError{code: exitSluiceError, err: err}
				}
			}
			err = landlock.ExecFamilies(o.Path, o.Argv, os.Environ())
			code := exitCannotExec
			if errors.Is(err, os.ErrNotExist) {
				code = exitNotFound
			}
			return &exitError{code: code, err: fmt.Errorf("%s: %w", o.Argv[0], err)}
		},
	}
}

// superviseFamilies runs `__families ARGS` (the shim that sandboxes the
// command and execs it) as a child and exits with its status, after
// writing it to status.
func superviseFamilies(status *os.File, args []string) error {
	// The running binary itself, not the path it was started from: a
	// daemon starts the shim from a descriptor in a caller's mount
	// namespace (a container), where that path is another file or none.
	self := "/proc/self/exe"
	if _, err := os.Stat(self); err != nil {
		if self, err = os.Executable(); err != nil {
			return &exitError{code: exitSluiceError, err: err}
		}
	}
	child := &exec.Cmd{Path: self, Args: append([]string{self, enforcer.FamiliesShim}, args...),
		Env: os.Environ(), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if code := exitstatus.Supervise(child, status); code != 0 {
		return &exitError{code: code}
	}
	return nil
}
