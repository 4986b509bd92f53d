// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/packaging/manpage"
)

// newManpagesCmd is a hidden command the packaging runs (make release): it
// writes a man page for every visible command into DIR. Shell completions
// come from cobra's own `sluice completion bash|zsh|fish`.
func newManpagesCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "__manpages DIR",
		Short:  "Write the man pages into DIR (for packaging)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := manpage.Write(args[0], cmd.Root(), version)
			return err
		},
	}
}
