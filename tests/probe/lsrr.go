// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"golang.org/x/sys/unix"
)

// IPv4 loose source and record route (RFC 791 option 131), set with
// setsockopt(IP_OPTIONS), which needs no privilege. As a socket option the
// route is written as the hops in order of travel; ip_options_compile
// (net/ipv4/ip_options.c) takes the first address out as the next hop
// ("faddr"), and tcp_v4_connect then routes the SYN to it, while the
// connect hook saw only the address passed to connect(). The final
// destination is written into the option's last slot on output.
//
// Option layout: type 0x83, length, pointer (4 = first slot), addresses.

// lsrrOption builds an LSRR option whose only hop is firstHop, padded with
// an end-of-options byte to a multiple of 4.
func lsrrOption(firstHop [4]byte) []byte {
	return []byte{
		0x83, 7, 4, // type LSRR, length 3+4, pointer
		firstHop[0], firstHop[1], firstHop[2], firstHop[3],
		0, // IPOPT_END
	}
}

// runLSRR sets the option on a TCP socket and connects to ALLOWED4.
func runLSRR(args []string, r *result) error {
	allowed, err := parseAddr(args[0])
	if err != nil {
		return err
	}
	denied, err := parseAddr(args[1])
	if err != nil {
		return err
	}
	if !allowed.Is4() || !denied.Is4() {
		return at("args", unix.EAFNOSUPPORT)
	}
	port, err := parsePort(args[2])
	if err != nil {
		return err
	}
	fd, err := socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptString(fd, unix.IPPROTO_IP, unix.IP_OPTIONS, string(lsrrOption(denied.As4()))); err != nil {
		return at("setsockopt", err)
	}
	if err := connect(fd, sockaddr(allowed, port)); err != nil {
		return err
	}
	r.Reply, err = readLine(fd)
	return err
}
