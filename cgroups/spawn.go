// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"fmt"
	"math"
)

// SpawnOptions says who the confined command runs as. The zero value is
// refused: uid 0 is never allowed (see ErrRootUID).
type SpawnOptions struct {
	// UID and GID are the real, effective and saved ids of the command.
	UID, GID uint32
	// Groups are the supplementary groups; empty means none (the caller's own
	// supplementary groups are always dropped, never inherited).
	Groups []uint32
	// Setsid starts the command in a new session without a controlling
	// terminal. That keeps it from injecting input into the caller's terminal
	// (TIOCSTI, on kernels that still allow it) and from receiving the
	// terminal's job-control signals, at the price of no interactive terminal.
	Setsid bool
}

// invalidID is (uid_t)-1, which setresuid and setgroups read as "unchanged"
// or reject: never a real identity.
const invalidID = math.MaxUint32

// validate refuses identities that would either keep root's powers or be
// silently misread by the kernel.
func (o SpawnOptions) validate() error {
	if o.UID == 0 {
		return fmt.Errorf("%w: a root process can write its pid into a cgroup.procs outside its session (or detach the BPF programs) and escape the enforcement; run it as an unprivileged user", ErrRootUID)
	}
	if o.UID == invalidID || o.GID == invalidID {
		return fmt.Errorf("cgroups: uid/gid %d is reserved (it means -1)", uint32(invalidID))
	}
	for _, g := range o.Groups {
		if g == invalidID {
			return fmt.Errorf("cgroups: supplementary group %d is reserved (it means -1)", g)
		}
	}
	return nil
}
