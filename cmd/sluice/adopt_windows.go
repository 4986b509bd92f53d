// SPDX-License-Identifier: Apache-2.0

package main

import "github.com/spf13/cobra"

func newAdoptCmd() *cobra.Command {
	return stub("adopt --pid N", "Confine a running process in a session of its own")
}
