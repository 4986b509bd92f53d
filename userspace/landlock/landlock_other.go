// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package landlock

import (
	"errors"
	"fmt"
)

// errNotLinux is every answer off Linux: Landlock and seccomp are Linux's.
var errNotLinux = fmt.Errorf("landlock: %w: Landlock and seccomp exist only on Linux", errors.ErrUnsupported)

// ABI returns the kernel's Landlock ABI version; off Linux, an error.
func ABI() (int, error) { return 0, errNotLinux }

// Available says why Exec cannot confine a command here: off Linux, always.
func Available() error { return errNotLinux }

// Exec confines the process and executes argv on Linux; off Linux it
// returns an error and runs nothing.
func Exec(rules Rules, argv []string, env []string) error { return errNotLinux }
