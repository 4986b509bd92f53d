// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import (
	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/userspace/landlock"
)

// newConfineCmd is landlock mode's hidden shim, which only Linux has.
func newConfineCmd() *cobra.Command { return &cobra.Command{Use: landlock.ShimName, Hidden: true} }
