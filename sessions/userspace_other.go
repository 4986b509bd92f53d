// SPDX-License-Identifier: Apache-2.0

//go:build !linux && !darwin

package sessions

import "os/exec"

// confineCommand runs the command with the proxy variables only: the WFP
// filter needs a dedicated user for the command, which sluice does not
// create yet (see userspace/wfp).
func confineCommand(cfg UserspaceConfig, _ uint16) (*exec.Cmd, string, error) {
	return exec.Command(cfg.Argv[0], cfg.Argv[1:]...), ModeProxy, nil
}
