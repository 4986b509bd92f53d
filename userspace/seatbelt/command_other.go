// SPDX-License-Identifier: Apache-2.0

//go:build !darwin

package seatbelt

import (
	"errors"
	"fmt"
	"os/exec"
)

// errNotDarwin is every answer off macOS.
var errNotDarwin = fmt.Errorf("seatbelt: %w: sandbox-exec exists only on macOS", errors.ErrUnsupported)

// Available says why Command cannot work here: off macOS, always.
func Available() error { return errNotDarwin }

// Command wraps argv in sandbox-exec on macOS; elsewhere it returns an
// error and no command.
func Command(profile string, argv []string) (*exec.Cmd, error) { return nil, errNotDarwin }
