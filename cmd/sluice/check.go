// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// checkStatus is the outcome of one check.
type checkStatus int

const (
	checkPass checkStatus = iota
	checkWarn             // enforcement works, something optional is missing
	checkFail             // enforcement is impossible until fixed
)

func (s checkStatus) String() string {
	return [...]string{"ok", "warn", "FAIL"}[s]
}

// checkResult is one line of `sluice check`.
type checkResult struct {
	name   string
	status checkStatus
	detail string
	fix    string // how to fix it, when not ok
}

func newCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Report whether this machine can enforce, and how to fix what is missing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			results := runChecks()
			if printChecks(cmd.OutOrStdout(), results) {
				return &exitError{code: 1}
			}
			return nil
		},
	}
}

// printChecks prints the results and reports whether any check failed.
func printChecks(w io.Writer, results []checkResult) (failed bool) {
	for _, r := range results {
		fmt.Fprintf(w, "%-5s %-22s %s\n", r.status, r.name, r.detail)
		if r.status != checkPass && r.fix != "" {
			fmt.Fprintf(w, "      %-22s fix: %s\n", "", r.fix)
		}
		failed = failed || r.status == checkFail
	}
	if failed {
		fmt.Fprintln(w, "kernel enforcement is NOT possible on this machine")
	} else {
		fmt.Fprintln(w, "kernel enforcement is possible on this machine")
	}
	return failed
}
