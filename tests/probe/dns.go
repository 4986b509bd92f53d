// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// runDNS sends one query the way the common clients do and reports what
// came back and from where: the test checks that sluice's redirection is
// invisible (the reply seems to come from the server that was asked).
func runDNS(args []string, r *result) error {
	server, err := netip.ParseAddr(args[0])
	if err != nil {
		return fmt.Errorf("server %q: %w", args[0], err)
	}
	port, err := strconv.Atoi(args[1])
	if err != nil {
		return fmt.Errorf("port %q: %w", args[1], err)
	}
	qtype, ok := dns.StringToType[args[3]]
	if !ok {
		return fmt.Errorf("unknown query type %q", args[3])
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(args[2]), qtype)
	wire, err := q.Pack()
	if err != nil {
		return err
	}
	sa := sockaddr(server, uint16(port))
	family := unix.AF_INET
	if sa6, ok := sa.(*unix.SockaddrInet6); ok && sa6 != nil {
		family = unix.AF_INET6
	}
	var resp []byte
	switch args[4] {
	case "udp", "udp-unconnected":
		fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return at("socket", err)
		}
		defer unix.Close(fd)
		tv := unix.NsecToTimeval(int64(timeout))
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		if args[4] == "udp" {
			if err := unix.Connect(fd, sa); err != nil {
				return at("connect", err)
			}
			if err := unix.Send(fd, wire, 0); err != nil {
				return at("send", err)
			}
			peer, err := unix.Getpeername(fd)
			if err == nil {
				r.From = sockaddrString(peer)
			}
		} else if err := unix.Sendto(fd, wire, 0, sa); err != nil {
			return at("sendto", err)
		}
		buf := make([]byte, 65535)
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return at("recvfrom", err)
		}
		if args[4] == "udp-unconnected" || r.From == "" {
			r.From = sockaddrString(from)
		}
		resp = buf[:n]
	case "tcp":
		d := net.Dialer{Timeout: timeout}
		c, err := d.Dial("tcp", netip.AddrPortFrom(server, uint16(port)).String())
		if err != nil {
			return at("connect", errnoOf(err))
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		r.From = c.RemoteAddr().String()
		conn := &dns.Conn{Conn: c}
		if err := conn.WriteMsg(q); err != nil {
			return at("send", err)
		}
		m, err := conn.ReadMsg()
		if err != nil {
			return at("recv", err)
		}
		resp, _ = m.Pack()
	default:
		return fmt.Errorf("mode %q: want udp, udp-unconnected or tcp", args[4])
	}
	m := new(dns.Msg)
	if err := m.Unpack(resp); err != nil {
		return at("unpack", err)
	}
	r.Rcode = dns.RcodeToString[m.Rcode]
	for _, rr := range m.Answer {
		switch v := rr.(type) {
		case *dns.A:
			r.Answers = append(r.Answers, v.A.String())
		case *dns.AAAA:
			r.Answers = append(r.Answers, v.AAAA.String())
		case *dns.CNAME:
			r.Answers = append(r.Answers, "CNAME "+v.Target)
		}
	}
	if m.Rcode != dns.RcodeSuccess {
		return at("rcode", fmt.Errorf("rcode %s", r.Rcode))
	}
	return nil
}

// runResolve uses the Go resolver, which reads /etc/resolv.conf like libc.
func runResolve(args []string, r *result) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", args[0])
	if err != nil {
		return at("resolve", err)
	}
	for _, ip := range ips {
		r.Answers = append(r.Answers, ip.Unmap().String())
	}
	return nil
}

// runResolveTCP resolves a name and connects to its first address.
func runResolveTCP(args []string, r *result) error {
	if err := runResolve(args[:1], r); err != nil {
		return err
	}
	if len(r.Answers) == 0 {
		return at("resolve", errors.New("no addresses"))
	}
	return runTCP([]string{r.Answers[0], args[1]}, r)
}

func sockaddrString(sa unix.Sockaddr) string {
	switch v := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(v.Addr), uint16(v.Port)).String()
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(v.Addr), uint16(v.Port)).String()
	}
	return fmt.Sprint(sa)
}

// errnoOf digs the syscall errno out of a net error, so the probe reports
// EPERM and not a wrapped message.
func errnoOf(err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
