// SPDX-License-Identifier: Apache-2.0

//go:build linux

package world

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// CDN is a world host that serves many names on one address, as a CDN
// does: a TLS server on ports 443 and 8443 that records the SNI of every
// ClientHello it receives, and an HTTP server on ports 80 and 8080 (and
// inside the TLS) that records every request's Host, skipping empty
// lines before a request as nginx does. Both answer "hello NAME". Beside them, two line services of other protocols: on
// LinePort the client speaks first, on BannerPort the server does (an
// SSH banner); both record the client's first line and answer "ok".
type CDN struct {
	mu    sync.Mutex
	snis  []string
	hosts []string
	lines []string
	quic  int
}

// The CDN's ports besides 80 and 443.
const (
	CDNAltTLSPort  = 8443
	CDNAltHTTPPort = 8080
	LinePort       = 6379
	BannerPort     = 2222
	// Banner is what the server on BannerPort says first.
	Banner = "SSH-2.0-cdn\r\n"
)

// Lines are the first lines clients sent to the line services, oldest
// first.
func (c *CDN) Lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// QUIC is how many datagrams arrived on UDP port 443.
func (c *CDN) QUIC() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.quic
}

// SNIs are the server names of the ClientHellos the CDN received ("" for
// one without SNI), oldest first.
func (c *CDN) SNIs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.snis...)
}

// Hosts are the Host headers of the requests it received.
func (c *CDN) Hosts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.hosts...)
}

// Saw reports whether any ClientHello or request named name.
func (c *CDN) Saw(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range append(append([]string(nil), c.snis...), c.hosts...) {
		if strings.EqualFold(s, name) {
			return true
		}
	}
	return false
}

// selfSigned is a throwaway certificate for any name (clients of the
// tests skip verification: the SNI is what is under test, not PKI).
func selfSigned(t testing.TB) tls.Certificate {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cdn.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: []string{"*.test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// ServeCDN starts the CDN on addrs (world hosts, added to the world's
// loopback): TLS on 443 and 8443, HTTP on 80 and 8080, the line services.
// t.Cleanup stops it.
func (w *World) ServeCDN(t testing.TB, addrs ...netip.Addr) *CDN {
	t.Helper()
	c := &CDN{}
	cert := selfSigned(t)
	handler := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.hosts = append(c.hosts, r.Host)
		c.mu.Unlock()
		fmt.Fprintf(rw, "hello %s\n", r.Host)
	})
	tcfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			c.mu.Lock()
			c.snis = append(c.snis, h.ServerName)
			c.mu.Unlock()
			return nil, nil
		},
		NextProtos: []string{"http/1.1"},
	}
	// TCP Fast Open on the listeners, as the big CDNs have it: a client's
	// first flight may ride in its SYN (the world's tcp_fastopen sysctl
	// enables the server side; the listener still needs its queue).
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_FASTOPEN, 16)
		}); err != nil {
			return err
		}
		return serr
	}}
	for _, a := range addrs {
		w.AddWorldAddr(t, a)
		var l80, l443, l8080, l8443, lline, lbanner net.Listener
		var u443 net.PacketConn
		if err := w.InWorld(func() (err error) {
			if l80, err = lc.Listen(context.Background(), network("tcp", a), netip.AddrPortFrom(a, 80).String()); err != nil {
				return err
			}
			for _, l := range []struct {
				l    *net.Listener
				port uint16
			}{{&l8080, CDNAltHTTPPort}, {&l8443, CDNAltTLSPort}, {&lline, LinePort}, {&lbanner, BannerPort}} {
				if *l.l, err = lc.Listen(context.Background(), network("tcp", a), netip.AddrPortFrom(a, l.port).String()); err != nil {
					return err
				}
			}
			if u443, err = net.ListenPacket(network("udp", a), netip.AddrPortFrom(a, 443).String()); err != nil {
				return err
			}
			l443, err = lc.Listen(context.Background(), network("tcp", a), netip.AddrPortFrom(a, 443).String())
			return err
		}); err != nil {
			t.Fatalf("world: CDN on %v: %v", a, err)
		}
		// UDP 443 stands for QUIC: it records and echoes each datagram.
		go func() {
			b := make([]byte, 2048)
			for {
				n, from, err := u443.ReadFrom(b)
				if err != nil {
					return
				}
				c.mu.Lock()
				c.quic++
				c.mu.Unlock()
				_, _ = u443.WriteTo(b[:n], from)
			}
		}()
		t.Cleanup(func() { u443.Close() })
		for _, s := range []struct {
			l   net.Listener
			tls bool
		}{{l80, false}, {l443, true}, {l8080, false}, {l8443, true}} {
			srv := &http.Server{Handler: handler, ReadHeaderTimeout: serverIOTimeout, IdleTimeout: serverIOTimeout}
			l := net.Listener(skipEmptyLines{s.l})
			if s.tls {
				l = tls.NewListener(s.l, tcfg)
			}
			go func() { _ = srv.Serve(l) }()
			t.Cleanup(func() { srv.Close() })
		}
		for _, l := range []struct {
			l      net.Listener
			banner bool
		}{{lline, false}, {lbanner, true}} {
			go c.serveLines(l.l, l.banner)
			t.Cleanup(func() { l.l.Close() })
		}
	}
	return c
}

// skipEmptyLines is a listener whose connections skip the empty lines
// before their first request line, as nginx and others do (RFC 9112 2.2
// allows it) and Go's server does not: the CDN stands for the servers
// that do.
type skipEmptyLines struct{ net.Listener }

func (l skipEmptyLines) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &skippingConn{Conn: c}, nil
}

// skippingConn drops CR and LF bytes until the first other byte.
type skippingConn struct {
	net.Conn
	started bool
}

func (c *skippingConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if c.started || n == 0 {
			return n, err
		}
		i := 0
		for i < n && (b[i] == '\r' || b[i] == '\n') {
			i++
		}
		if i < n {
			c.started = true
			return copy(b, b[i:n]), err
		}
		if err != nil {
			return 0, err
		}
	}
}

// serveLines is a line service: the banner first if banner, then the
// client's first line is recorded and answered.
func (c *CDN) serveLines(l net.Listener, banner bool) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(serverIOTimeout))
			if banner {
				if _, err := io.WriteString(conn, Banner); err != nil {
					return
				}
			}
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				return
			}
			c.mu.Lock()
			c.lines = append(c.lines, strings.TrimRight(line, "\r\n"))
			c.mu.Unlock()
			_, _ = io.WriteString(conn, "ok\n")
		}()
	}
}

// ServeCDNReset forgets what c recorded, so that a test can show the
// twin's records and then the confined run's apart.
func (w *World) ServeCDNReset(c *CDN) *CDN {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snis, c.hosts, c.lines, c.quic = nil, nil, nil, 0
	return c
}
