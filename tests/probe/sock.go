// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// parseAddr parses an address argument. Zones are refused: the test world
// has no link-local destinations, and a zone would silently change routing.
func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, at("args", err)
	}
	if a.Zone() != "" {
		return netip.Addr{}, at("args", fmt.Errorf("zoned address %q not supported", s))
	}
	return a, nil
}

// parsePort parses a port argument.
func parsePort(s string) (uint16, error) {
	p, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, at("args", fmt.Errorf("port %q: %w", s, err))
	}
	return uint16(p), nil
}

// parseAddrPort parses the common "ADDR PORT" argument pair.
func parseAddrPort(args []string) (netip.Addr, uint16, error) {
	a, err := parseAddr(args[0])
	if err != nil {
		return a, 0, err
	}
	p, err := parsePort(args[1])
	return a, p, err
}

// family picks the socket family for a destination. IPv4-mapped IPv6
// addresses deliberately stay AF_INET6 (see the package comment).
func family(a netip.Addr) int {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// sockaddr builds the unix.Sockaddr for a destination.
func sockaddr(a netip.Addr, port uint16) unix.Sockaddr {
	if a.Is4() {
		return &unix.SockaddrInet4{Addr: a.As4(), Port: int(port)}
	}
	return &unix.SockaddrInet6{Addr: a.As16(), Port: int(port)}
}

// rawSockaddr returns the C struct sockaddr_in/sockaddr_in6 for a
// destination, for the syscalls that take a pointer (sendmmsg, io_uring). The
// memory is Go-allocated: callers keep it alive with runtime.KeepAlive until
// the kernel has copied it.
func rawSockaddr(a netip.Addr, port uint16) (unsafe.Pointer, uint32) {
	if a.Is4() {
		sa := &unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.As4()}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], port)
		return unsafe.Pointer(sa), unix.SizeofSockaddrInet4
	}
	sa := &unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.As16()}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], port)
	return unsafe.Pointer(sa), unix.SizeofSockaddrInet6
}

// socket opens a non-blocking socket; failure is reported at stage "socket".
func socket(fam, typ, proto int) (int, error) {
	fd, err := unix.Socket(fam, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	return fd, at("socket", err)
}

// wait polls fd for events until the action's deadline. It returns the
// revents, or a timeoutError.
func wait(fd int, events int16) (int16, error) {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, errTimeout()
		}
		// Round up so that a sub-millisecond remainder still waits.
		ms := int((left + time.Millisecond - 1) / time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(fd), Events: events}}
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("poll: %w", err)
		}
		if n > 0 {
			return fds[0].Revents, nil
		}
	}
}

// finishConnect waits for a non-blocking connect (or a TFO SYN) to complete
// and returns its outcome from SO_ERROR.
func finishConnect(fd int) error {
	if _, err := wait(fd, unix.POLLOUT); err != nil {
		return err
	}
	soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return fmt.Errorf("getsockopt SO_ERROR: %w", err)
	}
	if soerr != 0 {
		return unix.Errno(soerr)
	}
	return nil
}

// connect connects fd to sa within the deadline, at stage "connect".
func connect(fd int, sa unix.Sockaddr) error {
	err := unix.Connect(fd, sa)
	if errors.Is(err, unix.EINPROGRESS) {
		err = finishConnect(fd)
	}
	return at("connect", err)
}

// readLine reads what a stream peer sends until a newline, EOF or 64
// bytes, whichever comes first, at stage "read".
func readLine(fd int) (string, error) {
	var got []byte
	buf := make([]byte, 64)
	for len(got) < 64 {
		if _, err := wait(fd, unix.POLLIN); err != nil {
			return string(got), at("read", err)
		}
		n, err := unix.Read(fd, buf[:64-len(got)])
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return string(got), at("read", err)
		}
		if n == 0 {
			break
		}
		got = append(got, buf[:n]...)
		if got[len(got)-1] == '\n' {
			break
		}
	}
	if len(got) == 0 {
		return "", at("read", errors.New("EOF before any data"))
	}
	return string(got), nil
}

// recv waits for one datagram on fd and returns it, at stage "recv".
func recv(fd int) ([]byte, error) {
	buf := make([]byte, 2048)
	for {
		if _, err := wait(fd, unix.POLLIN); err != nil {
			return nil, at("recv", err)
		}
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, at("recv", err)
		}
		return buf[:n], nil
	}
}
