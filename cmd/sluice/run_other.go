//go:build !linux

package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/allowlist"
)

func runConfined(_ *cobra.Command, _ runOptions, _ *allowlist.Policy, _ int64, _ []string) error {
	return &exitError{code: exitSluiceError, err: errors.New("kernel enforcement is only available on Linux")}
}
