package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/exitstatus"
	"github.com/sluice-dev/sluice/userspace/landlock"
)

// newFamiliesCmd is BPF mode's hidden shim: `__families --path P -- ARGV`
// installs the socket-family filter and execs P with ARGV.
//
// With `--exit-fd N` first (the daemon's sessions), it stays as the
// session's supervisor instead: it runs `__families --path P -- ARGV` as
// its child and writes the child's exit status to descriptor N, which
// outlives a daemon restart (package exitstatus).
func newFamiliesCmd() *cobra.Command {
	usage := "usage: " + enforcer.FamiliesShim + " [--exit-fd N] --path PATH -- ARGV"
	return &cobra.Command{
		Use:                enforcer.FamiliesShim + " [--exit-fd N] --path PATH -- ARGV...",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) >= 2 && args[0] == "--exit-fd" {
				fd, err := strconv.Atoi(args[1])
				if err != nil || fd < 3 || len(args) < 6 {
					return &exitError{code: exitSluiceError, err: errors.New(usage)}
				}
				return superviseFamilies(os.NewFile(uintptr(fd), "exit-status"), args[2:])
			}
			if len(args) < 4 || args[0] != "--path" || args[2] != "--" {
				return &exitError{code: exitSluiceError, err: errors.New(usage)}
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

// superviseFamilies runs `__families ARGS` (the shim that installs the
// filter and execs the command) as a child and exits with its status,
// after writing it to status.
func superviseFamilies(status *os.File, args []string) error {
	self, err := os.Executable()
	if err != nil {
		return &exitError{code: exitSluiceError, err: err}
	}
	child := &exec.Cmd{Path: self, Args: append([]string{self, enforcer.FamiliesShim}, args...),
		Env: os.Environ(), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	if code := exitstatus.Supervise(child, status); code != 0 {
		return &exitError{code: code}
	}
	return nil
}
