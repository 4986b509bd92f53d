// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"os/exec"

	"github.com/sluice-dev/sluice/userspace/seatbelt"
)

// confineCommand wraps the command in sandbox-exec with a profile that
// allows outbound network only to the proxy (and the loopback ports),
// unless the mode is ModeProxy.
func confineCommand(cfg UserspaceConfig, proxyPort uint16) (*exec.Cmd, string, error) {
	argv := cfg.Argv
	if cfg.Mode == ModeProxy {
		return exec.Command(argv[0], argv[1:]...), ModeProxy, nil
	}
	text, err := seatbelt.Generate(seatbelt.Profile{ProxyPort: proxyPort, LoopbackPorts: cfg.LoopbackPorts})
	if err != nil {
		return nil, "", err
	}
	c, err := seatbelt.Command(text, argv)
	if err != nil {
		return nil, "", err
	}
	return c, ModeSeatbelt, nil
}
