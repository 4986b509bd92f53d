// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package sandbox

import (
	"errors"
	"os"
)

// errNotLinux is what the kernel layers answer elsewhere: sandboxes are
// built from Linux namespaces and Landlock.
var errNotLinux = errors.New("sandbox: only on Linux")

// LandlockABI is 0 outside Linux.
func LandlockABI() int { return 0 }

// ProbeLandlock says that there is no Landlock outside Linux.
func ProbeLandlock() (int, error) { return 0, errNotLinux }

// RestrictConnect fails outside Linux.
func RestrictConnect([]uint16) error { return errNotLinux }

// Scopes are what a session's Landlock domain confines (Linux only).
type Scopes struct {
	Signal       bool
	AbstractUnix bool
}

// RestrictSelf fails outside Linux.
func RestrictSelf(Scopes) ([]string, error) { return nil, errNotLinux }

// Enter fails outside Linux.
func Enter(Spec, *os.File, func(string)) error { return errNotLinux }

// Check reports that no layer exists outside Linux.
func Check() []Layer {
	why := "only on Linux"
	return []Layer{{Name: "process isolation", Level: Missing, Detail: why}, {Name: "path hiding", Level: Missing, Detail: why}}
}
