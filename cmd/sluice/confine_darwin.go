// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/userspace/seatbelt"
)

// confineCommand wraps the command in sandbox-exec with a profile that
// allows outbound network only to the proxy, unless --mode proxy.
func confineCommand(mode string, o runOptions, proxyPort uint16, argv []string) (*exec.Cmd, string, error) {
	if mode == modeProxy {
		return exec.Command(argv[0], argv[1:]...), modeProxy, nil
	}
	prof := seatbelt.Profile{ProxyPort: proxyPort}
	for _, p := range o.loopbackPorts {
		prof.LoopbackPorts = append(prof.LoopbackPorts, uint16(p))
	}
	text, err := seatbelt.Generate(prof)
	if err != nil {
		return nil, "", err
	}
	c, err := seatbelt.Command(text, argv)
	if err != nil {
		return nil, "", err
	}
	return c, "seatbelt", nil
}

func newConfineCmd() *cobra.Command { return &cobra.Command{Use: "__confine", Hidden: true} }
