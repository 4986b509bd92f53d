// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"strings"

	"golang.org/x/sys/unix"
)

// unixAddr is the address of a unix socket named PATH, or "@name" for an
// abstract one.
func unixAddr(name string) *unix.SockaddrUnix {
	if a, ok := strings.CutPrefix(name, "@"); ok {
		return &unix.SockaddrUnix{Name: "\x00" + a}
	}
	return &unix.SockaddrUnix{Name: name}
}

// runUnix connects a stream unix socket and reads the server's greeting.
func runUnix(args []string, r *result) error {
	fd, err := socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := connect(fd, unixAddr(args[0])); err != nil {
		return err
	}
	r.Reply, err = readLine(fd)
	return err
}

// runUnixServe listens on a stream unix socket named PATH (or @name) and
// writes the greeting to the first client; the reply is "served".
func runUnixServe(args []string, r *result) error {
	ln, err := socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, unixAddr(args[0])); err != nil {
		return at("bind", err)
	}
	if err := unix.Listen(ln, 1); err != nil {
		return at("listen", err)
	}
	if _, err := wait(ln, unix.POLLIN); err != nil {
		return at("accept", err)
	}
	c, _, err := unix.Accept(ln)
	if err != nil {
		return at("accept", err)
	}
	defer unix.Close(c)
	if _, err := unix.Write(c, greeting); err != nil {
		return at("write", err)
	}
	r.Reply = "served"
	return nil
}

// runUnixDgram sends one datagram on an unconnected unix socket.
func runUnixDgram(args []string, r *result) error {
	fd, err := socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, greeting, 0, unixAddr(args[0])); err != nil {
		return at("sendto", err)
	}
	r.Sent = 1
	return nil
}

// runTCPSelf listens on a loopback port of its own, connects to it and
// reads the greeting its listener sends: a listener created inside the
// session.
func runTCPSelf(args []string, r *result) error {
	ln, err := socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return at("bind", err)
	}
	if err := unix.Listen(ln, 1); err != nil {
		return at("listen", err)
	}
	sa, err := unix.Getsockname(ln)
	if err != nil {
		return at("getsockname", err)
	}
	fd, err := socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := connect(fd, sa); err != nil {
		return err
	}
	if _, err := wait(ln, unix.POLLIN); err != nil {
		return at("accept", err)
	}
	c, _, err := unix.Accept(ln)
	if err != nil {
		return at("accept", err)
	}
	defer unix.Close(c)
	if _, err := unix.Write(c, greeting); err != nil {
		return at("write", err)
	}
	r.Reply, err = readLine(fd)
	return err
}
