// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/api"
)

func newAdoptCmd() *cobra.Command {
	var req api.AdoptRequest
	cmd := &cobra.Command{
		Use:   "adopt --pid N",
		Short: "Confine a running process, and everything it starts from now on, in a session of its own (root)",
		Long: `Ask the daemon to put the running process N into a new session with the machine
allowlist: every process it starts from now on is confined. Connections it opened
before continue (their sockets keep their cgroup); processes it started before
stay where they are. The session ends when its last process exits. Only root
outside every sluice session may adopt. Prints the session's name.`,
		Example: `  sudo sluice adopt --pid "$(pgrep -f Runner.Worker)" --name job`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("pid") {
				return errors.New("--pid is required")
			}
			info, err := client().Adopt(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), info.Name)
			return nil
		},
	}
	cmd.Flags().IntVar(&req.PID, "pid", 0, "the process to adopt")
	cmd.Flags().StringVar(&req.Name, "name", "", "a short label for the session's messages")
	cmd.Flags().BoolVar(&req.Audit, "audit", false, "audit mode: deny nothing, report what would be denied")
	return cmd
}
