// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// ICMP message types used by the probe.
const (
	icmpEchoReply     = 0
	icmpEchoRequest   = 8
	icmpv6EchoRequest = 128
	icmpv6EchoReply   = 129
)

// echoSeq marks the probe's echo request so replies can be told apart.
const echoSeq = 0x5e1c

// echoRequest builds an ICMP(v6) echo request. The checksum is filled in for
// ICMPv4 only: the kernel computes ICMPv6 checksums (it needs the pseudo
// header) and those of ping sockets.
func echoRequest(v6 bool, id uint16) []byte {
	m := make([]byte, 8, 8+6)
	m[0] = icmpEchoRequest
	if v6 {
		m[0] = icmpv6EchoRequest
	}
	binary.BigEndian.PutUint16(m[4:], id)
	binary.BigEndian.PutUint16(m[6:], echoSeq)
	m = append(m, "sluice"...)
	if !v6 {
		binary.BigEndian.PutUint16(m[2:], checksum(m))
	}
	return m
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// icmpProto returns the ICMP protocol number for a destination's family.
func icmpProto(a netip.Addr) int {
	if a.Is4() {
		return unix.IPPROTO_ICMP
	}
	return unix.IPPROTO_ICMPV6
}

// awaitEchoReply reads until an echo reply with our sequence number arrives.
// Raw IPv4 sockets deliver the IP header too (skipIPHeader); raw sockets
// also see other processes' ICMP, hence the id check when id != 0.
func awaitEchoReply(fd int, v6, skipIPHeader bool, id uint16) error {
	want := byte(icmpEchoReply)
	if v6 {
		want = icmpv6EchoReply
	}
	for {
		b, err := recv(fd)
		if err != nil {
			return err
		}
		if skipIPHeader && len(b) > 0 {
			ihl := int(b[0]&0x0f) * 4
			if ihl > len(b) {
				continue
			}
			b = b[ihl:]
		}
		if len(b) < 8 || b[0] != want || binary.BigEndian.Uint16(b[6:]) != echoSeq {
			continue
		}
		if id != 0 && binary.BigEndian.Uint16(b[4:]) != id {
			continue
		}
		return nil
	}
}

// runPing uses an unprivileged ICMP "ping socket" (SOCK_DGRAM), allowed by
// net.ipv4.ping_group_range; sluice's sock_create hook must refuse it.
func runPing(args []string, r *result) error {
	addr, err := parseAddr(args[0])
	if err != nil {
		return err
	}
	v6 := !addr.Is4()
	fd, err := socket(family(addr), unix.SOCK_DGRAM, icmpProto(addr))
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// The kernel replaces the identifier with the socket's "port".
	if err := unix.Sendto(fd, echoRequest(v6, 0), 0, sockaddr(addr, 0)); err != nil {
		return at("sendto", err)
	}
	if err := awaitEchoReply(fd, v6, false, 0); err != nil {
		return err
	}
	r.Reply = "echo reply"
	return nil
}

// runRaw sends an echo request through a SOCK_RAW socket. Without
// CAP_NET_RAW, socket() fails with EPERM at stage "socket", which is the
// kernel refusing, not sluice.
func runRaw(args []string, r *result) error {
	addr, err := parseAddr(args[0])
	if err != nil {
		return err
	}
	v6 := !addr.Is4()
	fd, err := socket(family(addr), unix.SOCK_RAW, icmpProto(addr))
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	id := uint16(os.Getpid())
	if err := unix.Sendto(fd, echoRequest(v6, id), 0, sockaddr(addr, 0)); err != nil {
		return at("sendto", err)
	}
	if err := awaitEchoReply(fd, v6, !v6, id); err != nil {
		return err
	}
	r.Reply = "echo reply"
	return nil
}

// runSCTP connects an SCTP stream socket. A kernel without SCTP answers
// socket() with EPROTONOSUPPORT (or ESOCKTNOSUPPORT): reported as
// "unsupported" so that tests can skip rather than pass vacuously.
func runSCTP(args []string, r *result) error {
	addr, port, err := parseAddrPort(args)
	if err != nil {
		return err
	}
	fd, err := socket(family(addr), unix.SOCK_STREAM, unix.IPPROTO_SCTP)
	if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ESOCKTNOSUPPORT) {
		r.Unsupported = true
		return err
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := connect(fd, sockaddr(addr, port)); err != nil {
		return err
	}
	r.Reply = fmt.Sprintf("connected to %v", netip.AddrPortFrom(addr, port))
	return nil
}
