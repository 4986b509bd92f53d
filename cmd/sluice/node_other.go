// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func runNode(*cobra.Command, daemonOptions, nodeOptions) error {
	return errors.New("sluice node runs on Linux only")
}

func runNodeHook(*cobra.Command, hookOptions) error {
	return errors.New("sluice node hook runs on Linux only")
}
