// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/sandbox/shim"
)

// newFamiliesCmd is the hidden shim every session's command starts
// through (package sandbox/shim has its body): `__families --path P
// [flags] -- ARGV`, or with `--exit-fd N` first, the session's
// supervisor. This command only maps its outcome to sluice's exit codes.
func newFamiliesCmd() *cobra.Command {
	return &cobra.Command{
		Use:                shim.Name + " [" + shim.FlagExitFD + " N] --path PATH -- ARGV...",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) >= 2 && args[0] == shim.FlagExitFD {
				fd, err := strconv.Atoi(args[1])
				if err != nil || fd < 3 {
					return &exitError{code: exitSluiceError, err: fmt.Errorf("%s %q: want a descriptor number", shim.FlagExitFD, args[1])}
				}
				if _, err := shim.Parse(args[2:]); err != nil {
					return &exitError{code: exitSluiceError, err: err}
				}
				code, err := shim.Supervise(os.NewFile(uintptr(fd), "exit-status"), args[2:])
				if err != nil {
					return &exitError{code: exitSluiceError, err: err}
				}
				if code != 0 {
					return &exitError{code: code}
				}
				return nil
			}
			o, err := shim.Parse(args)
			if err != nil {
				return &exitError{code: exitSluiceError, err: err}
			}
			err = shim.Exec(o, os.Environ(), os.Stderr)
			var layer *shim.LayerError
			code := exitCannotExec
			switch {
			case errors.As(err, &layer):
				code = exitSluiceError
			case errors.Is(err, os.ErrNotExist):
				code = exitNotFound
			}
			return &exitError{code: code, err: err}
		},
	}
}
