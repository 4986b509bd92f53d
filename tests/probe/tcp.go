// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"errors"

	"golang.org/x/sys/unix"
)

// greeting is what probe sends to stream servers (tfo puts it in the SYN).
var greeting = []byte("probe\n")

// runTCP connects and reads the server's greeting.
func runTCP(args []string, r *result) error {
	addr, port, err := parseAddrPort(args)
	if err != nil {
		return err
	}
	fd, err := socket(family(addr), unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := connect(fd, sockaddr(addr, port)); err != nil {
		return err
	}
	r.Reply, err = readLine(fd)
	return err
}

// runTFO sends data with MSG_FASTOPEN on an unconnected TCP socket: the
// connect happens inside sendmsg(2), a path that skips connect(2) itself.
// Sent reports the bytes the kernel put in the SYN (0 without a cookie).
func runTFO(args []string, r *result) error {
	addr, port, err := parseAddrPort(args)
	if err != nil {
		return err
	}
	fd, err := socket(family(addr), unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	n, err := unix.SendmsgN(fd, greeting, nil, sockaddr(addr, port), unix.MSG_FASTOPEN)
	switch {
	case errors.Is(err, unix.EINPROGRESS):
		// No cookie yet: the kernel sent a SYN carrying a cookie request and
		// none of the data. Finish the handshake, then send the data.
		n = 0
		if err := finishConnect(fd); err != nil {
			return at("sendto", err)
		}
	case err != nil:
		return at("sendto", err)
	default:
		if err := finishConnect(fd); err != nil {
			return at("sendto", err)
		}
	}
	r.Sent = n
	if n < len(greeting) {
		if _, err := unix.Write(fd, greeting[n:]); err != nil {
			return at("write", err)
		}
	}
	r.Reply, err = readLine(fd)
	return err
}
