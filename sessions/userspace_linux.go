// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/sluice-dev/sluice/userspace/landlock"
)

// confineCommand builds the command of a Linux userspace session. Landlock
// mode re-executes this binary as the shim (`sluice __confine`) that
// confines itself and then execs the command, so the rules are in force
// before the command's first instruction; any other mode runs the command
// as it is, with the proxy variables only.
func confineCommand(cfg UserspaceConfig, proxyPort uint16) (*exec.Cmd, string, error) {
	argv := cfg.Argv
	if cfg.Mode != ModeLandlock {
		return exec.Command(argv[0], argv[1:]...), ModeProxy, nil
	}
	rules := landlock.Rules{ConnectPorts: append([]uint16{proxyPort}, cfg.LoopbackPorts...)}
	self, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("find sluice's own binary: %w", err)
	}
	args := append([]string{landlock.ShimName}, rules.Args()...)
	args = append(append(args, "--"), argv...)
	c := exec.Command(self, args...)
	if u := cfg.User; u != nil {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}}
	}
	return c, ModeLandlock, nil
}
