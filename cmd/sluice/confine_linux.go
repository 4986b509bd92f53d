// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/userspace/landlock"
)

// confineCommand builds the command for a userspace mode. Landlock mode
// re-executes sluice as a shim (`sluice __confine`) that confines itself
// and then execs the command, so the rules are in force before the
// command's first instruction.
func confineCommand(mode string, o runOptions, proxyPort uint16, argv []string) (*exec.Cmd, string, error) {
	if mode != modeLandlock {
		return exec.Command(argv[0], argv[1:]...), modeProxy, nil
	}
	rules := landlock.Rules{ConnectPorts: []uint16{proxyPort}}
	for _, p := range o.loopbackPorts {
		if p == 0 || p > 65535 {
			return nil, "", fmt.Errorf("--loopback-port %d: not a port", p)
		}
		rules.ConnectPorts = append(rules.ConnectPorts, uint16(p))
	}
	self, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("find sluice's own binary: %w", err)
	}
	args := append([]string{"__confine"}, rules.Args()...)
	args = append(append(args, "--"), argv...)
	c := exec.Command(self, args...)
	if os.Geteuid() == 0 {
		spawn, err := targetUser(o.user)
		if err != nil {
			return nil, "", err
		}
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: spawn.UID, Gid: spawn.GID, Groups: spawn.Groups}}
	}
	return c, modeLandlock, nil
}

// newConfineCmd is the hidden shim of landlock mode.
func newConfineCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "__confine [--connect-port P]... -- COMMAND [ARGS...]",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			rules, argv, err := landlock.ParseArgs(args)
			if err != nil {
				return &exitError{code: exitSluiceError, err: err}
			}
			err = landlock.Exec(rules, argv, os.Environ())
			code := exitSluiceError
			if os.IsNotExist(err) {
				code = exitNotFound
			}
			return &exitError{code: code, err: fmt.Errorf("confine %s: %w (ports %s)", argv[0], err, strconv.Quote(fmt.Sprint(rules.ConnectPorts)))}
		},
	}
}
