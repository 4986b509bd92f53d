// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package cgroups

import (
	"fmt"
	"os/exec"
	"runtime"
	"time"
)

// DefaultRemoveTimeout is the bound Session.Remove uses on Linux when given a
// timeout of zero or less.
const DefaultRemoveTimeout = 5 * time.Second

func errNotSupported() error {
	return fmt.Errorf("%w (this is %s)", ErrNotSupported, runtime.GOOS)
}

// Mount finds the cgroup2 mount on Linux; elsewhere it wraps ErrNotSupported.
func Mount() (string, error) { return "", errNotSupported() }

// OpenRoot opens the sluice root cgroup on Linux; elsewhere it wraps
// ErrNotSupported.
func OpenRoot(name string) (*Root, error) { return nil, errNotSupported() }

// LookupUser resolves "USER[:GROUP]" on Linux; elsewhere it wraps
// ErrNotSupported.
func LookupUser(spec string) (SpawnOptions, error) { return SpawnOptions{}, errNotSupported() }

// ID wraps ErrNotSupported outside Linux.
func (r *Root) ID() (uint64, error) { return 0, errNotSupported() }

// NewSession wraps ErrNotSupported outside Linux.
func (r *Root) NewSession(name string) (*Session, error) { return nil, errNotSupported() }

// Session wraps ErrNotSupported outside Linux.
func (r *Root) Session(name string) (*Session, error) { return nil, errNotSupported() }

// Sessions wraps ErrNotSupported outside Linux.
func (r *Root) Sessions() ([]*Session, error) { return nil, errNotSupported() }

// Remove wraps ErrNotSupported outside Linux.
func (r *Root) Remove() error { return errNotSupported() }

// SetPidsMax wraps ErrNotSupported outside Linux.
func (s *Session) SetPidsMax(n int64) error { return errNotSupported() }

// SetMemoryMax wraps ErrNotSupported outside Linux.
func (s *Session) SetMemoryMax(bytes int64) error { return errNotSupported() }

// Procs wraps ErrNotSupported outside Linux.
func (s *Session) Procs() ([]int, error) { return nil, errNotSupported() }

// Populated wraps ErrNotSupported outside Linux.
func (s *Session) Populated() (bool, error) { return false, errNotSupported() }

// Kill wraps ErrNotSupported outside Linux.
func (s *Session) Kill() error { return errNotSupported() }

// Remove wraps ErrNotSupported outside Linux.
func (s *Session) Remove(timeout time.Duration) error { return errNotSupported() }

// Start wraps ErrNotSupported outside Linux.
func (s *Session) Start(cmd *exec.Cmd, opts SpawnOptions) error { return errNotSupported() }

// Move wraps ErrNotSupported outside Linux.
func (s *Session) Move(pid int) error { return errNotSupported() }
