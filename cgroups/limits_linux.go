// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
)

// SetPidsMax limits how many processes and threads the session may hold at
// once (pids.max); -1 removes the limit. n must be at least 1, because the
// confined command itself counts. It returns a *ControllerError (wrapping
// ErrControllerUnavailable) saying why, when sessions have no pids
// controller, as on hybrid machines where it is bound to cgroup v1.
func (s *Session) SetPidsMax(n int64) error {
	v, err := limitValue("pids.max", n)
	if err != nil {
		return err
	}
	if err := s.root.controllerErr("pids"); err != nil {
		return err
	}
	if err := wrapSession(s, writeFile(s.root.mount, s.rel("pids.max"), v)); err != nil {
		return err
	}
	return s.setUnitLimit("TasksMax", n)
}

// SetMemoryMax sets the session's hard memory limit (memory.max) in bytes; -1
// (ParseSize's "max") removes it. A finite limit also sets memory.swap.max to
// 0, so the limit bounds the session's whole footprint instead of pushing the
// excess into swap; "max" restores unlimited swap with it. Kernels without
// swap accounting have no memory.swap.max, which is then skipped. It returns a
// *ControllerError when sessions have no memory controller.
func (s *Session) SetMemoryMax(bytes int64) error {
	v, err := limitValue("memory.max", bytes)
	if err != nil {
		return err
	}
	if err := s.root.controllerErr("memory"); err != nil {
		return err
	}
	if err := writeFile(s.root.mount, s.rel("memory.max"), v); err != nil {
		return wrapSession(s, err)
	}
	swap := "0"
	if bytes == -1 {
		swap = "max"
	}
	err = writeFile(s.root.mount, s.rel("memory.swap.max"), swap)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return wrapSession(s, err)
	}
	return s.setUnitLimit("MemoryMax", bytes)
}

// limitValue formats a limit for cgroupfs, refusing 0 and negatives other
// than -1: the kernel would accept 0, but it makes the session unusable.
func limitValue(file string, n int64) (string, error) {
	switch {
	case n == -1:
		return "max", nil
	case n < 1:
		return "", fmt.Errorf("cgroups: %s: %d is not a limit (want at least 1, or -1 for max)", file, n)
	}
	return strconv.FormatInt(n, 10), nil
}

func wrapSession(s *Session, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cgroups: session %s: %w", s.name, err)
}
