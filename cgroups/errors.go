// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"fmt"
)

// ErrNotSupported is wrapped by every constructor and method on systems other
// than Linux: cgroup v2 exists only there.
var ErrNotSupported = errors.New("cgroups: cgroup v2 sessions are only supported on Linux")

// ErrNoCgroup2 is wrapped when no cgroup2 filesystem is mounted.
var ErrNoCgroup2 = errors.New("cgroups: no cgroup2 filesystem is mounted")

// ErrControllerUnavailable is wrapped (through a *ControllerError) when a limit
// needs a controller that session cgroups do not have.
var ErrControllerUnavailable = errors.New("cgroups: controller unavailable")

// ErrRootUID is wrapped when asked to run the confined command as uid 0.
var ErrRootUID = errors.New("cgroups: refusing to run the confined command as uid 0")

// ErrInvalidName is wrapped when a root or session name could not be used
// safely as a single cgroup directory name.
var ErrInvalidName = errors.New("cgroups: invalid cgroup name")

// ControllerError says which controller a limit needed and why session cgroups
// do not have it. It unwraps to ErrControllerUnavailable.
type ControllerError struct {
	// Controller is the cgroup v2 controller name, such as "pids" or "memory".
	Controller string
	// Reason explains why it is unavailable, in words a user can act on.
	Reason string
}

// Error implements error.
func (e *ControllerError) Error() string {
	return fmt.Sprintf("cgroups: controller %q is unavailable for session cgroups: %s", e.Controller, e.Reason)
}

// Unwrap lets errors.Is(err, ErrControllerUnavailable) match.
func (e *ControllerError) Unwrap() error { return ErrControllerUnavailable }
