// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/preflight"
)

// newCheckCmd is `sluice check`: the machine's checks (package
// preflight), printed one a line; exit status 1 when kernel enforcement
// is impossible.
func newCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Report whether this machine can enforce, and how to fix what is missing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			results := preflight.Run(preflight.Options{Socket: daemonSocket(), DNSPathDefault: dnsPathDefault})
			if printChecks(cmd.OutOrStdout(), results) {
				return &exitError{code: 1}
			}
			return nil
		},
	}
}

// printChecks prints the results and reports whether any check failed.
// The columns and the last line are an interface: scripts grep them.
func printChecks(w io.Writer, results []preflight.Result) (failed bool) {
	for _, r := range results {
		fmt.Fprintf(w, "%-5s %-22s %s\n", r.Status, r.Name, r.Detail)
		if r.Status != preflight.Pass && r.Fix != "" {
			fmt.Fprintf(w, "      %-22s fix: %s\n", "", r.Fix)
		}
	}
	failed = preflight.Failed(results)
	if failed {
		fmt.Fprintln(w, "kernel enforcement is NOT possible on this machine")
	} else {
		fmt.Fprintln(w, "kernel enforcement is possible on this machine")
	}
	return failed
}
