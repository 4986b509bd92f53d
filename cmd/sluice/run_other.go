// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import (
	"errors"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/sessions"
)

// modeFilter is the strongest userspace mode of this platform: Seatbelt
// on macOS; elsewhere only the proxy.
func modeFilter() string {
	if runtime.GOOS == "darwin" {
		return sessions.ModeSeatbelt
	}
	return modeProxy
}

// userspaceUser is nil: only Linux's landlock mode runs the command as
// another user.
func userspaceUser(string, runOptions) (*cgroups.SpawnOptions, error) { return nil, nil }

func runConfined(cmd *cobra.Command, o runOptions, policy *allowlist.Policy, _ int64, argv []string) error {
	switch o.mode {
	case modeBPF, modeLandlock:
		return &exitError{code: exitSluiceError, err: errors.New("--mode " + o.mode + " is only available on Linux")}
	case modeProxy:
		return runUserspace(cmd, o, policy, argv, modeProxy, nil)
	}
	return runUserspace(cmd, o, policy, argv, modeFilter(), []string{"bpf and landlock are Linux-only"})
}
