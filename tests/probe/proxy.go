// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
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
	raw := os.Getenv("HTTPS_PROXY")
	if raw == "" {
		return at("env", errors.New("HTTPS_PROXY is not set"))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return at("env", fmt.Errorf("HTTPS_PROXY %q: %w", raw, err))
	}
	port, err := strconv.Atoi(args[1])
	if err != nil {
		return fmt.Errorf("port %q: %w", args[1], err)
	}
	target := args[0]
	if a, err := netip.ParseAddr(target); err == nil {
		target = netip.AddrPortFrom(a, uint16(port)).String()
	} else {
		target = net.JoinHostPort(target, args[1])
	}
	c, err := net.DialTimeout("tcp", u.Host, timeout)
	if err != nil {
		return at("connect", errnoOf(err))
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		return at("proxy", err)
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
		return at("proxy", errors.New(body))
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return at("proxy", err)
		}
		if line == "\r\n" {
			break
		}
	}
	greeting, err := br.ReadString('\n')
	if err != nil {
		return at("read", err)
	}
	r.Reply = greeting
	return nil
}
