// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newCleanupCmd() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove every session, cgroup, pin and file sluice left on this machine",
		Long: `Kill every confined session, remove their cgroups and the sluice cgroup,
unpin the datapath (detaching its programs) and remove sluice's state files.
Running sessions lose their confinement together with their processes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			found, err := cleanup(stateDir)
			switch {
			case err != nil:
				return err
			case !found:
				// Nothing left behind is what cleanup is for: success.
				fmt.Fprintln(cmd.OutOrStdout(), "sluice: nothing to clean")
			default:
				fmt.Fprintln(cmd.OutOrStdout(), "sluice: removed all sessions, cgroups, pins and state")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "sluice's state directory (default /run/sluice, or /run/$SLUICE_INSTANCE; another one only with SLUICE_INSTANCE set)")
	return cmd
}
