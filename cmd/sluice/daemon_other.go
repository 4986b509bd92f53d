// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func runDaemon(*cobra.Command, daemonOptions) error {
	return errors.New("the sluice daemon runs on Linux only")
}
