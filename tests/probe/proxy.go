// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// runProxyConnect reaches ADDR PORT through $HTTPS_PROXY with an HTTP
// CONNECT, as a program that honours the proxy variables would, and reads
// the server's greeting through the tunnel.
func runProxyConnect(args []string, r *result) error {
	c, br, err := proxyTunnel(args[0], args[1])
	if err != nil {
		return err
	}
	defer c.Close()
	greeting, err := br.ReadString('\n')
	if err != nil {
		return at("read", err)
	}
	r.Reply = greeting
	return nil
}

// proxyTunnel opens an HTTP CONNECT tunnel to HOST:PORT through
// $HTTPS_PROXY. The reader holds whatever the proxy sent after its 200
// (nothing, before the client speaks): read the tunnel through it.
func proxyTunnel(host, portArg string) (net.Conn, *bufio.Reader, error) {
	raw := os.Getenv("HTTPS_PROXY")
	if raw == "" {
		return nil, nil, at("env", errors.New("HTTPS_PROXY is not set"))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, at("env", fmt.Errorf("HTTPS_PROXY %q: %w", raw, err))
	}
	port, err := strconv.Atoi(portArg)
	if err != nil {
		return nil, nil, fmt.Errorf("port %q: %w", portArg, err)
	}
	target := host
	if a, err := netip.ParseAddr(target); err == nil {
		target = netip.AddrPortFrom(a, uint16(port)).String()
	} else {
		target = net.JoinHostPort(target, portArg)
	}
	c, err := net.DialTimeout("tcp", u.Host, timeout)
	if err != nil {
		return nil, nil, at("connect", errnoOf(err))
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	fail := func(err error) (net.Conn, *bufio.Reader, error) {
		c.Close()
		return nil, nil, at("proxy", err)
	}
	status, err := br.ReadString('\n')
	if err != nil {
		return fail(err)
	}
	if !strings.Contains(status, " 200 ") {
		body := strings.TrimSpace(status)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				break
			}
			body += " | " + strings.TrimSpace(line)
		}
		return fail(errors.New(body))
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return fail(err)
		}
		if line == "\r\n" {
			break
		}
	}
	return c, br, nil
}

// socksTunnel opens a SOCKS5 CONNECT tunnel to HOST:PORT (the name sent
// for the proxy to resolve, socks5h) through $ALL_PROXY.
func socksTunnel(host, portArg string) (net.Conn, error) {
	raw := os.Getenv("ALL_PROXY")
	if raw == "" {
		return nil, at("env", errors.New("ALL_PROXY is not set"))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, at("env", fmt.Errorf("ALL_PROXY %q: %w", raw, err))
	}
	port, err := strconv.ParseUint(portArg, 10, 16)
	if err != nil || len(host) > 255 {
		return nil, fmt.Errorf("target %q:%q", host, portArg)
	}
	c, err := net.DialTimeout("tcp", u.Host, timeout)
	if err != nil {
		return nil, at("connect", errnoOf(err))
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	req := []byte{5, 1, 0, 5, 1, 0, 3, byte(len(host))}
	req = append(append(req, host...), byte(port>>8), byte(port))
	if _, err := c.Write(req); err != nil {
		c.Close()
		return nil, at("proxy", errnoOf(err))
	}
	// The method choice, then VER REP RSV ATYP (an IPv4 or IPv6 bound address).
	reply := make([]byte, 2+4)
	if _, err := io.ReadFull(c, reply); err != nil {
		c.Close()
		return nil, at("proxy", errnoOf(err))
	}
	if reply[1] != 0 || reply[3] != 0 {
		c.Close()
		return nil, at("proxy", fmt.Errorf("SOCKS5 method %#x, reply %#x", reply[1], reply[3]))
	}
	rest := 4 + 2
	if reply[5] == 4 {
		rest = 16 + 2
	}
	if _, err := io.ReadFull(c, make([]byte, rest)); err != nil {
		c.Close()
		return nil, at("proxy", errnoOf(err))
	}
	return c, nil
}
