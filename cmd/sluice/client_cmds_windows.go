// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// The daemon and its unix-socket API are Linux-only; on Windows these
// commands exist (scripts see the same CLI) and say so.
var errNoDaemon = errors.New("the sluice daemon is not available on Windows")

// daemonSocket is "": no daemon socket on Windows.
func daemonSocket() string { return "" }

func stub(use, short string) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, RunE: func(*cobra.Command, []string) error { return errNoDaemon }}
}

func newSessionsCmd() *cobra.Command { return stub("sessions", "List the daemon's sessions") }
func newEventsCmd() *cobra.Command   { return stub("events", "Stream the daemon's events") }
func newAllowCmd() *cobra.Command {
	return stub("allow ENTRY...", "Add entries to the machine allowlist")
}
func newDenyCmd() *cobra.Command {
	return stub("deny ID | ENTRY...", "Deny a prompt, or remove entries from the machine allowlist")
}
func newRevokeCmd() *cobra.Command  { return stub("revoke OWNER", "Remove an owner's entries") }
func newPromptsCmd() *cobra.Command { return stub("prompts", "List the pending ask-mode prompts") }
func newApproveCmd() *cobra.Command { return stub("approve ID", "Approve a pending prompt") }
