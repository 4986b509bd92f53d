//go:build linux

package main

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// runSocket opens a socket of any family and type, to show which families
// a confined program may create at all.
func runSocket(args []string, r *result) error {
	family, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("family %q: %w", args[0], err)
	}
	typ, err := strconv.Atoi(args[1])
	if err != nil {
		return fmt.Errorf("type %q: %w", args[1], err)
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return at("socket", err)
	}
	unix.Close(fd)
	return nil
}
