// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Source routing lets a socket name one destination to connect()/sendto()
// (what sluice's sock_addr hooks see) while the packet leaves for another.
// The actions here steer traffic for ALLOWED6 to DENIED6 first.
//
// struct ipv6_sr_hdr (include/uapi/linux/seg6.h), 8 bytes then segments:
//
//	nexthdr u8, hdrlen u8 (8-octet units after the first 8), type u8 (4),
//	segments_left u8, first_segment u8 (a.k.a. last_entry), flags u8, tag u16,
//	segments [first_segment+1]struct in6_addr, in reverse order of travel:
//	segments[0] is the final destination, segments[first_segment] the first hop.
//
// When the kernel pushes a sticky type-4 header (ipv6_push_rthdr4 in
// net/ipv6/exthdrs.c) it overwrites segments[0] with the address the socket
// was given and sends the packet to segments[segments_left]; routing
// (fl6_update_dst) uses that same segment. With segments_left = 1 and
// segments[1] = DENIED6, the packet's IPv6 destination is DENIED6 although
// connect() named ALLOWED6. No privilege is needed for IPV6_RTHDR.

// segmentRoutingHeader builds a type-4 routing header whose first hop is
// firstHop and whose final segment is final.
func segmentRoutingHeader(final, firstHop netip.Addr) []byte {
	const segments = 2
	b := make([]byte, 8+segments*16)
	b[0] = 0                   // nexthdr: filled in by the kernel
	b[1] = uint8(len(b)/8 - 1) // hdrlen
	b[2] = 4                   // type: IPV6_SRCRT_TYPE_4
	b[3] = segments - 1        // segments_left: start at the first hop
	b[4] = segments - 1        // first_segment
	f, h := final.As16(), firstHop.As16()
	copy(b[8:], f[:])  // segments[0]
	copy(b[24:], h[:]) // segments[1]
	return b
}

// parseSRHArgs parses "ALLOWED6 DENIED6 PORT"; both addresses must be IPv6.
func parseSRHArgs(args []string) (allowed, denied netip.Addr, port uint16, err error) {
	if allowed, err = parseAddr(args[0]); err != nil {
		return
	}
	if denied, err = parseAddr(args[1]); err != nil {
		return
	}
	if !allowed.Is6() || !denied.Is6() || allowed.Is4In6() || denied.Is4In6() {
		err = at("args", unix.EAFNOSUPPORT)
		return
	}
	port, err = parsePort(args[2])
	return
}

// runSRH installs the header as a sticky option (setsockopt IPV6_RTHDR) on
// a TCP socket and connects to ALLOWED6.
func runSRH(args []string, r *result) error {
	allowed, denied, port, err := parseSRHArgs(args)
	if err != nil {
		return err
	}
	fd, err := socket(unix.AF_INET6, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	srh := segmentRoutingHeader(allowed, denied)
	if err := unix.SetsockoptString(fd, unix.IPPROTO_IPV6, unix.IPV6_RTHDR, string(srh)); err != nil {
		return at("setsockopt", err)
	}
	if err := connect(fd, sockaddr(allowed, port)); err != nil {
		return err
	}
	r.Reply, err = readLine(fd)
	return err
}

// runSRHUDP installs the sticky header on an unconnected UDP socket and
// sends to ALLOWED6 with sendto (the sendmsg6 hook's path).
func runSRHUDP(args []string, r *result) error {
	allowed, denied, port, err := parseSRHArgs(args)
	if err != nil {
		return err
	}
	fd, err := socket(unix.AF_INET6, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	srh := segmentRoutingHeader(allowed, denied)
	if err := unix.SetsockoptString(fd, unix.IPPROTO_IPV6, unix.IPV6_RTHDR, string(srh)); err != nil {
		return at("setsockopt", err)
	}
	if err := unix.Sendto(fd, datagram, 0, sockaddr(allowed, port)); err != nil {
		return at("sendto", err)
	}
	return awaitEcho(fd, r)
}

// runSRHCmsg passes the header per datagram in an IPV6_RTHDR control
// message on sendmsg(2) from an unconnected UDP socket. Note that
// ip6_datagram_send_ctl (net/ipv6/datagram.c) accepts only type-2 routing
// headers in a cmsg, so a kernel is expected to refuse this with EINVAL at
// stage "sendmsg"; the action exists to keep that fact under test.
func runSRHCmsg(args []string, r *result) error {
	allowed, denied, port, err := parseSRHArgs(args)
	if err != nil {
		return err
	}
	fd, err := socket(unix.AF_INET6, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	srh := segmentRoutingHeader(allowed, denied)
	oob := make([]byte, unix.CmsgSpace(len(srh)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level = unix.IPPROTO_IPV6
	h.Type = unix.IPV6_RTHDR
	h.SetLen(unix.CmsgLen(len(srh)))
	copy(oob[unix.CmsgLen(0):], srh)
	if _, err := unix.SendmsgN(fd, datagram, oob, sockaddr(allowed, port), 0); err != nil {
		return at("sendmsg", err)
	}
	return awaitEcho(fd, r)
}
