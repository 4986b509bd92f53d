package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/sandbox"
	"github.com/sluice-dev/sluice/userspace/landlock"
)

// newFamiliesCmd is BPF mode's hidden shim: `__families --path P [flags]
// -- ARGV` puts itself in the session's Landlock domain (unless
// --share-processes, which instead refuses new user namespaces unless
// --allow-userns), installs the socket-family filter and execs P with ARGV.
func newFamiliesCmd() *cobra.Command {
	return &cobra.Command{
		Use:                enforcer.FamiliesShim + " --path PATH -- ARGV...",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
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
