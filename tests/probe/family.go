// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"fmt"
	"net"
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

// runSocketProto is runSocket with a protocol: socket(FAMILY, TYPE, PROTO),
// e.g. 2 1 262 for MPTCP.
func runSocketProto(args []string, r *result) error {
	proto, err := strconv.Atoi(args[2])
	if err != nil {
		return fmt.Errorf("protocol %q: %w", args[2], err)
	}
	family, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("family %q: %w", args[0], err)
	}
	typ, err := strconv.Atoi(args[1])
	if err != nil {
		return fmt.Errorf("type %q: %w", args[1], err)
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return at("socket", err)
	}
	unix.Close(fd)
	return nil
}

// runListenGo listens on ADDR (port 0) the way a Go server does, with the
// net package, which tries MPTCP first and falls back to TCP; the reply is
// the address it got.
func runListenGo(args []string, r *result) error {
	a, err := parseAddr(args[0])
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(a.String(), "0"))
	if err != nil {
		return at("listen", err)
	}
	r.Reply = l.Addr().String()
	return l.Close()
}
