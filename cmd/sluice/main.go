// SPDX-License-Identifier: Apache-2.0

// Command sluice confines AI agents and the processes they start to
// loopback and the hosts their user allowed, enforced in the kernel.
//
// It holds the cobra commands and nothing else. `sluice run` uses
// package enforcer in-process (embedded mode) or package api to reach a
// daemon; audit lines go through package audit either way. The daemon's
// server (package daemon) is reached only from `sluice daemon`
// (daemon_linux.go), a rule imports_test.go holds.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes of sluice's own failures, chosen like env(1) and docker's so
// that they do not collide with the common exit codes of the command.
const (
	exitSluiceError = 125 // sluice could not set up confinement
	exitCannotExec  = 126 // the command was found but could not be run
	exitNotFound    = 127 // the command was not found
)

// exitError carries an exit status through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// socketFlag is the --socket flag shared by the client commands.
var socketFlag string

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Kernel-level egress enforcement for AI agents",
		Long: `sluice confines a command and everything it starts to loopback and the
hosts you allowed. Enforcement happens in the kernel (cgroup BPF), so a
program that ignores HTTP_PROXY cannot get around it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&socketFlag, "socket", "", "the daemon's API socket (default $SLUICE_SOCKET or /run/sluice/sluice.sock)")
	root.AddCommand(newRunCmd(), newDaemonCmd(), newNodeCmd(), newCheckCmd(), newCleanupCmd(), newStatusCmd(), newSessionsCmd(),
		newEventsCmd(), newPromptsCmd(), newApproveCmd(), newAllowCmd(), newDenyCmd(), newRevokeCmd(), newAdoptCmd(), newSuggestCmd(), newLearnCmd(), newVersionCmd(), newConfineCmd(), newFamiliesCmd(), newManpagesCmd())
	return root
}

func main() {
	err := newRootCmd().Execute()
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, "sluice:", withFlagHint(ee.err))
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "sluice:", withFlagHint(err))
	os.Exit(exitSluiceError)
}
