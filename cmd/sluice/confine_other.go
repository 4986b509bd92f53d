// SPDX-License-Identifier: Apache-2.0

//go:build !linux && !darwin

package main

import (
	"os/exec"

	"github.com/spf13/cobra"
)

// confineCommand runs the command with the proxy variables only: the WFP
// filter needs a dedicated user for the command, which sluice does not
// create yet (see userspace/wfp).
func confineCommand(_ string, _ runOptions, _ uint16, argv []string) (*exec.Cmd, string, error) {
	return exec.Command(argv[0], argv[1:]...), modeProxy, nil
}

func newConfineCmd() *cobra.Command { return &cobra.Command{Use: "__confine", Hidden: true} }
