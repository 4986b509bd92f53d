package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/userspace/landlock"
)

// newFamiliesCmd is BPF mode's hidden shim: `__families --path P -- ARGV`
// installs the socket-family filter and execs P with ARGV.
func newFamiliesCmd() *cobra.Command {
	return &cobra.Command{
		Use:                enforcer.FamiliesShim + " --path PATH -- ARGV...",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) < 4 || args[0] != "--path" || args[2] != "--" {
				return &exitError{code: exitSluiceError, err: errors.New("usage: " + enforcer.FamiliesShim + " --path PATH -- ARGV")}
			}
			err := landlock.ExecFamilies(args[1], args[3:], os.Environ())
			code := exitCannotExec
			if errors.Is(err, os.ErrNotExist) {
				code = exitNotFound
			}
			return &exitError{code: code, err: fmt.Errorf("%s: %w", args[3], err)}
		},
	}
}
