// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// The benchmarks compare the proxy with a direct connection in one run, on
// loopback, with the default policy (loopback only) and the default
// dialer:
//
//	go test -run '^$' -bench . -count 5 ./proxy/
//
// BenchmarkConnections: a new connection per iteration (CONNECT, one byte
// echoed, close). BenchmarkThroughput: one stream of 256 MiB per
// iteration, through a CONNECT tunnel.

// benchServer accepts on loopback and runs handle for each connection
// until b's cleanup.
func benchServer(b *testing.B, handle func(net.Conn)) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
		}
	})
	b.Cleanup(func() { l.Close(); wg.Wait() })
	return l.Addr().String()
}

// benchProxy starts a proxy with the defaults, on a listener made as
// sluice makes it, and returns its address.
func benchProxy(b *testing.B) string {
	b.Helper()
	p, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := ListenLoopback(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	b.Cleanup(func() {
		p.Close()
		if err := <-done; !errors.Is(err, ErrClosed) {
			b.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

// dialVia returns a function that opens a connection to target, directly
// or through a CONNECT tunnel of the proxy at proxyAddr, ready for data.
func dialVia(proxyAddr, target string) func() (net.Conn, error) {
	if proxyAddr == "" {
		return func() (net.Conn, error) { return net.Dial("tcp", target) }
	}
	req := []byte(fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", target))
	reply := make([]byte, len(connectEstablished))
	return func() (net.Conn, error) {
		c, err := net.Dial("tcp", proxyAddr)
		if err != nil {
			return nil, err
		}
		if _, err := c.Write(req); err != nil {
			c.Close()
			return nil, err
		}
		// The reply has a known length: reading exactly that leaves
		// nothing buffered, so c can be used raw afterwards.
		if _, err := io.ReadFull(c, reply); err != nil || string(reply) != connectEstablished {
			c.Close()
			return nil, fmt.Errorf("CONNECT reply %q: %v", reply, err)
		}
		return c, nil
	}
}

func BenchmarkConnections(b *testing.B) {
	echo := benchServer(b, func(c net.Conn) {
		var one [1]byte
		if _, err := io.ReadFull(c, one[:]); err != nil {
			return
		}
		if _, err := c.Write(one[:]); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, c) // until the client's FIN
	})
	for _, mode := range []string{"direct", "proxy"} {
		b.Run(mode, func(b *testing.B) {
			var dial func() (net.Conn, error)
			if mode == "proxy" {
				dial = dialVia(benchProxy(b), echo)
			} else {
				dial = dialVia("", echo)
			}
			one := []byte{'x'}
			got := make([]byte, 1)
			for b.Loop() {
				c, err := dial()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Write(one); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, got); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
		})
	}
}

func BenchmarkThroughput(b *testing.B) {
	const size = 256 << 20
	// The sink reads everything and then reports how much it got, so an
	// iteration ends only when every byte has arrived.
	sink := benchServer(b, func(c net.Conn) {
		buf := make([]byte, 1<<20)
		var n uint64
		for {
			m, err := c.Read(buf)
			n += uint64(m)
			if err != nil {
				break
			}
		}
		_ = binary.Write(c, binary.BigEndian, n)
	})
	for _, mode := range []string{"direct", "proxy"} {
		b.Run(mode, func(b *testing.B) {
			var dial func() (net.Conn, error)
			if mode == "proxy" {
				dial = dialVia(benchProxy(b), sink)
			} else {
				dial = dialVia("", sink)
			}
			buf := make([]byte, 1<<20)
			b.SetBytes(size)
			for b.Loop() {
				c, err := dial()
				if err != nil {
					b.Fatal(err)
				}
				_ = c.SetDeadline(time.Now().Add(time.Minute))
				for sent := 0; sent < size; sent += len(buf) {
					if _, err := c.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				_ = c.(*net.TCPConn).CloseWrite()
				var n uint64
				if err := binary.Read(c, binary.BigEndian, &n); err != nil || n != size {
					b.Fatalf("the sink got %d bytes (%v), want %d", n, err, size)
				}
				c.Close()
			}
		})
	}
}
