// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// runDNSRaw sends hand-made bytes to a DNS server over UDP, in one of the
// ways the kernel can turn into something other than one datagram per
// send, and reports the first reply's rcode. It exists for the kernel DNS
// path's leak tests: the bytes are whatever the test built (several queries
// back to back, odd labels), and HOW says how they are handed to the kernel:
//
//	plain            one sendto
//	gso-sockopt:N    setsockopt(SOL_UDP, UDP_SEGMENT, N), then one sendto: the
//	                 kernel splits the bytes into datagrams of N bytes after
//	                 the cgroup egress hook ran
//	gso-cmsg:N       one sendmsg with a UDP_SEGMENT control message of N
//	more:N           the first N bytes with MSG_MORE, the rest without: one
//	                 datagram
//	cork:N           UDP_CORK, the first N bytes, the rest, uncork: one datagram
//
// Sent is the number of bytes the kernel took. A reply is not needed for
// ok (a test judges by what the world's server recorded); the rcode of the
// first reply within the deadline is reported when one came.
func runDNSRaw(args []string, r *result) error {
	addr, port, err := parseAddrPort(args[:2])
	if err != nil {
		return err
	}
	payload, err := hex.DecodeString(args[3])
	if err != nil {
		return at("args", fmt.Errorf("payload: %w", err))
	}
	how, nstr, _ := strings.Cut(args[2], ":")
	n := 0
	if how != "plain" {
		if n, err = strconv.Atoi(nstr); err != nil || n <= 0 || (how != "gso-sockopt" && how != "gso-cmsg" && n >= len(payload)) {
			return at("args", fmt.Errorf("how %q: want plain, gso-sockopt:N, gso-cmsg:N, more:N or cork:N", args[2]))
		}
	}
	fd, err := socket(family(addr), unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	sa := sockaddr(addr, port)
	switch how {
	case "plain":
		err = at("sendto", unix.Sendto(fd, payload, 0, sa))
	case "gso-sockopt":
		if err := unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT, n); err != nil {
			return at("setsockopt", err)
		}
		err = at("sendto", unix.Sendto(fd, payload, 0, sa))
	case "gso-cmsg":
		oob := make([]byte, unix.CmsgSpace(2))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
		binary.NativeEndian.PutUint16(oob[unix.CmsgLen(0):], uint16(n))
		_, err = unix.SendmsgN(fd, payload, oob, sa, 0)
		err = at("sendmsg", err)
	case "more":
		if err = at("sendto", unix.Sendto(fd, payload[:n], unix.MSG_MORE, sa)); err == nil {
			err = at("sendto", unix.Sendto(fd, payload[n:], 0, sa))
		}
	case "cork":
		if err := unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_CORK, 1); err != nil {
			return at("setsockopt", err)
		}
		if err = at("sendto", unix.Sendto(fd, payload[:n], 0, sa)); err == nil {
			err = at("sendto", unix.Sendto(fd, payload[n:], 0, sa))
		}
		if err == nil {
			err = at("setsockopt", unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_CORK, 0))
		}
	default:
		return at("args", fmt.Errorf("how %q: want plain, gso-sockopt:N, gso-cmsg:N, more:N or cork:N", args[2]))
	}
	if err != nil {
		return err
	}
	r.Sent = len(payload)
	got, err := recv(fd)
	if err != nil {
		var te timeoutError
		if errors.As(err, &te) {
			return nil // no reply: the test judges by the world's log
		}
		return err
	}
	m := new(dns.Msg)
	if err := m.Unpack(got); err == nil {
		r.Rcode = dns.RcodeToString[m.Rcode]
	}
	return nil
}
