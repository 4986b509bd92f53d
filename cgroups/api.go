// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"os/exec"
	"time"
)

// These assertions keep the Linux implementation and the stubs for other
// systems offering the same methods: a method missing on either side breaks
// the build there, not a caller's build later.
var (
	_ interface {
		ID() (uint64, error)
		NewSession(name string) (*Session, error)
		Session(name string) (*Session, error)
		Sessions() ([]*Session, error)
		Remove() error
	} = (*Root)(nil)

	_ interface {
		SetPidsMax(n int64) error
		SetMemoryMax(bytes int64) error
		Procs() ([]int, error)
		Populated() (bool, error)
		Kill() error
		Remove(timeout time.Duration) error
		Start(cmd *exec.Cmd, opts SpawnOptions) error
		Move(pid int) error
	} = (*Session)(nil)

	_ func() (string, error)             = Mount
	_ func(string) (*Root, error)        = OpenRoot
	_ func(string) (SpawnOptions, error) = LookupUser
)
