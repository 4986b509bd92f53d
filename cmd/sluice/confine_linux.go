// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/userspace/landlock"
)

// newConfineCmd is the hidden shim of landlock mode: the session service
// (sessions.StartUserspace) re-executes sluice as it, so the command is
// confined before its first instruction.
func newConfineCmd() *cobra.Command {
	return &cobra.Command{
		Use:                landlock.ShimName + " [--connect-port P]... -- COMMAND [ARGS...]",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			rules, argv, err := landlock.ParseArgs(args)
			if err != nil {
				return &exitError{code: exitSluiceError, err: err}
			}
			err = landlock.Exec(rules, argv, os.Environ())
			code := exitSluiceError
			if os.IsNotExist(err) {
				code = exitNotFound
			}
			return &exitError{code: code, err: fmt.Errorf("confine %s: %w (ports %s)", argv[0], err, strconv.Quote(fmt.Sprint(rules.ConnectPorts)))}
		},
	}
}
