// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"bufio"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// pickAddr returns target itself if it is an address, else the first
// address of family 4 or 6 the system resolver gives for it.
func pickAddr(target, fam string, r *result) (netip.Addr, error) {
	if a, err := netip.ParseAddr(target); err == nil {
		return a, nil
	}
	if err := runResolve([]string{target}, r); err != nil {
		return netip.Addr{}, err
	}
	for _, s := range r.Answers {
		a, err := netip.ParseAddr(s)
		if err == nil && (a.Is4() == (fam == "4")) {
			return a, nil
		}
	}
	return netip.Addr{}, at("resolve", fmt.Errorf("no IPv%s address for %s", fam, target))
}

// dialNamed connects to TARGET's address of family FAM on PORT and
// records the peer getpeername shows in From. FAM "proxy" opens an HTTP
// CONNECT tunnel to TARGET:PORT through $HTTPS_PROXY instead, "socks" a
// SOCKS5 one through $ALL_PROXY, as programs that honour the proxy
// variables do (the proxy resolves the name).
func dialNamed(args []string, r *result) (net.Conn, error) {
	switch args[1] {
	case "proxy":
		c, br, err := proxyTunnel(args[0], args[2])
		if err != nil {
			return nil, err
		}
		return &bufferedConn{Conn: c, r: br}, nil
	case "socks":
		return socksTunnel(args[0], args[2])
	}
	a, err := pickAddr(args[0], args[1], r)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(args[2], 10, 16)
	if err != nil {
		return nil, at("args", err)
	}
	c, err := net.DialTimeout("tcp", netip.AddrPortFrom(a, uint16(port)).String(), timeout)
	if err != nil {
		return nil, at("connect", errnoOf(err))
	}
	r.From = c.RemoteAddr().String()
	_ = c.SetDeadline(time.Now().Add(timeout))
	return c, nil
}

// bufferedConn reads through the reader that read a proxy's reply.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// runTLSName: TLS to TARGET (a name resolved through the system resolver,
// or an address) with the SNI given, certificate unchecked; one request,
// the first line of the answer in Reply. SNI "-" sends none.
func runTLSName(args []string, r *result) error {
	c, err := dialNamed(args, r)
	if err != nil {
		return err
	}
	defer c.Close()
	cfg := &tls.Config{InsecureSkipVerify: true, ServerName: args[3]}
	if args[3] == "-" {
		cfg.ServerName = ""
	}
	tc := tls.Client(c, cfg)
	if err := tc.Handshake(); err != nil {
		return at("handshake", errnoOf(err))
	}
	return request(tc, args[3], r)
}

// runHTTPName: one plain HTTP/1.1 request with the Host given.
func runHTTPName(args []string, r *result) error {
	c, err := dialNamed(args, r)
	if err != nil {
		return err
	}
	defer c.Close()
	return request(c, args[3], r)
}

// runSendName: connect and send a line (an SSH-like client banner), then
// read the peer's first line.
func runSendName(args []string, r *result) error {
	c, err := dialNamed(args, r)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := io.WriteString(c, args[3]+"\r\n"); err != nil {
		return at("write", errnoOf(err))
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	r.Reply = line
	if err != nil {
		return at("read", errnoOf(err))
	}
	return nil
}

// runBannerReply: connect, read the line the server says first (an SSH
// banner), then send LINE and read the answer, as a client of a protocol
// whose server speaks first does; Reply is the banner and the answer.
func runBannerReply(args []string, r *result) error {
	c, err := dialNamed(args, r)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	banner, err := br.ReadString('\n')
	r.Reply = banner
	if err != nil {
		return at("read banner", errnoOf(err))
	}
	if _, err := io.WriteString(c, args[3]+"\r\n"); err != nil {
		return at("write", errnoOf(err))
	}
	line, err := br.ReadString('\n')
	r.Reply += line
	if err != nil {
		return at("read", errnoOf(err))
	}
	return nil
}

// runHTTPRaw: connect and send the bytes BASE64 decodes to (a request
// head as an attacker writes it), CHUNK bytes per write (0: one write),
// then read the peer's first line.
func runHTTPRaw(args []string, r *result) error {
	raw, err := base64.StdEncoding.DecodeString(args[3])
	if err != nil {
		return fmt.Errorf("BASE64: %w", err)
	}
	chunk, err := strconv.Atoi(args[4])
	if err != nil || chunk < 0 {
		return fmt.Errorf("CHUNK %q: want a byte count", args[4])
	}
	c, err := dialNamed(args, r)
	if err != nil {
		return err
	}
	defer c.Close()
	if chunk == 0 {
		chunk = len(raw)
	}
	for len(raw) > 0 {
		n := min(chunk, len(raw))
		if _, err := c.Write(raw[:n]); err != nil {
			return at("write", errnoOf(err))
		}
		raw = raw[n:]
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	r.Reply = line
	if err != nil {
		if errors.Is(err, io.EOF) && line == "" {
			return at("read", io.ErrUnexpectedEOF)
		}
		return at("read", errnoOf(err))
	}
	return nil
}

func request(c io.ReadWriter, host string, r *result) error {
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host); err != nil {
		return at("write", errnoOf(err))
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	r.Reply = line
	if err != nil {
		if errors.Is(err, io.EOF) && line == "" {
			return at("read", io.ErrUnexpectedEOF)
		}
		return at("read", errnoOf(err))
	}
	return nil
}

// runUDPName sends one datagram to TARGET's address on PORT (QUIC's port
// in the tests) and waits for the echo.
func runUDPName(args []string, r *result) error {
	a, err := pickAddr(args[0], args[1], r)
	if err != nil {
		return err
	}
	return runUDPConnected([]string{a.String(), args[2]}, r)
}

// runTLSECH: a TLS 1.3 ClientHello with an Encrypted ClientHello for an
// X25519 config made up here, public_name OUTER (the outer SNI) and SNI
// as the inner name. No server holds the key, so the handshake fails
// even where it is let through; the world records the outer SNI.
func runTLSECH(args []string, r *result) error {
	c, err := dialNamed(args, r)
	if err != nil {
		return err
	}
	defer c.Close()
	list, err := echConfigList(args[4])
	if err != nil {
		return at("ech", err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: args[3], InsecureSkipVerify: true, MinVersion: tls.VersionTLS13,
		EncryptedClientHelloConfigList: list})
	return at("handshake", errnoOf(tc.Handshake()))
}

// echConfigList builds an ECHConfigList (draft-ietf-tls-esni-22) of one
// X25519 / HKDF-SHA256 / AES-128-GCM config.
func echConfigList(publicName string) ([]byte, error) {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	pub := k.PublicKey().Bytes()
	c := []byte{7}
	c = binary.BigEndian.AppendUint16(c, 0x0020)
	c = binary.BigEndian.AppendUint16(c, uint16(len(pub)))
	c = append(c, pub...)
	c = binary.BigEndian.AppendUint16(c, 4)
	c = binary.BigEndian.AppendUint16(c, 0x0001)
	c = binary.BigEndian.AppendUint16(c, 0x0001)
	c = append(c, 0, byte(len(publicName)))
	c = append(c, publicName...)
	c = binary.BigEndian.AppendUint16(c, 0)
	cfg := binary.BigEndian.AppendUint16(nil, 0xfe0d)
	cfg = binary.BigEndian.AppendUint16(cfg, uint16(len(c)))
	cfg = append(cfg, c...)
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(cfg))), cfg...), nil
}
