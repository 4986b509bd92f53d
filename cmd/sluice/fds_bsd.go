// SPDX-License-Identifier: Apache-2.0

//go:build unix && !linux

package main

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedOnExec marks every descriptor from 3 on close-on-exec
// (macOS has no close_range: /dev/fd lists them).
func closeInheritedOnExec() error {
	ents, err := os.ReadDir("/dev/fd")
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
