// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedOnExec marks every descriptor from 3 on close-on-exec.
// exec closes only descriptors opened close-on-exec, as Go opens its own;
// the ones a process inherited stay open across it.
func closeInheritedOnExec() error {
	if unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil {
		return nil
	}
	// Kernels before 5.11 lack the flag: one by one.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("mark inherited descriptors close-on-exec: %w", err)
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= 3 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}
