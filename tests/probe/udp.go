// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"bytes"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// datagram is the payload of every UDP probe; the world's server echoes it.
var datagram = []byte("probe datagram\n")

// awaitEcho waits for the server's echo of datagram.
func awaitEcho(fd int, r *result) error {
	got, err := recv(fd)
	if err != nil {
		return err
	}
	r.Reply = string(got)
	if !bytes.Equal(got, datagram) {
		return at("recv", fmt.Errorf("echo %q, want %q", got, datagram))
	}
	return nil
}

// runUDP sends from an unconnected socket: the destination travels in
// sendto(2), the path of sluice's sendmsg4/6 hooks.
func runUDP(args []string, r *result) error {
	addr, port, err := parseAddrPort(args)
	if err != nil {
		return err
	}
	fd, err := socket(family(addr), unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, datagram, 0, sockaddr(addr, port)); err != nil {
		return at("sendto", err)
	}
	return awaitEcho(fd, r)
}

// runUDPConnected connects first (as dig does), then sends without an
// address: the path of the connect4/6 hooks.
func runUDPConnected(args []string, r *result) error {
	addr, port, err := parseAddrPort(args)
	if err != nil {
		return err
	}
	fd, err := socket(family(addr), unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := connect(fd, sockaddr(addr, port)); err != nil {
		return err
	}
	if _, err := unix.Write(fd, datagram); err != nil {
		return at("send", err)
	}
	return awaitEcho(fd, r)
}

// runSendmmsg sends two datagrams with one sendmmsg(2), each with its own
// msg_name, from an unconnected socket. Sent is the count the kernel took.
func runSendmmsg(args []string, r *result) error {
	addr, port, err := parseAddrPort(args)
	if err != nil {
		return err
	}
	fd, err := socket(family(addr), unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)

	// x/sys/unix has no sendmmsg wrapper; build struct mmsghdr by hand.
	var (
		msgs [2]unix.Mmsghdr
		iovs [2]unix.Iovec
		sas  [2]unsafe.Pointer
	)
	for i := range msgs {
		sa, salen := rawSockaddr(addr, port)
		sas[i] = sa
		iovs[i].Base = &datagram[0]
		iovs[i].SetLen(len(datagram))
		msgs[i].Hdr.Name = (*byte)(sa)
		msgs[i].Hdr.Namelen = salen
		msgs[i].Hdr.Iov = &iovs[i]
		msgs[i].Hdr.SetIovlen(1)
	}
	n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])),
		uintptr(len(msgs)), 0, 0, 0)
	runtime.KeepAlive(sas)
	runtime.KeepAlive(iovs)
	if errno != 0 {
		return at("sendmmsg", errno)
	}
	r.Sent = int(n)
	if r.Sent != len(msgs) {
		return at("sendmmsg", fmt.Errorf("sent %d of %d messages", n, len(msgs)))
	}
	return awaitEcho(fd, r)
}
