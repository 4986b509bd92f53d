// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
)

// FuzzServeConn feeds arbitrary bytes to a connection handler, HTTP or
// SOCKS5 by the first byte, over in-memory pipes: upstreams are pipes too,
// answering every request with a fixed response, so nothing touches the
// network. The handler must neither panic nor hang.
//
//	go test -run '^$' -fuzz FuzzServeConn -fuzztime 30s ./proxy/
func FuzzServeConn(f *testing.F) {
	for _, seed := range []string{
		"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\nhello",
		"CONNECT 203.0.113.5:443 HTTP/1.1\r\n\r\n",
		"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET http://allowed.test/2 HTTP/1.1\r\n\r\n",
		"POST http://allowed.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX: y\r\n\r\n",
		"POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
		"GET / HTTP/1.1\r\n\r\n",
		"\x05\x01\x00\x05\x01\x00\x03\x0callowed.test\x01\xbbdata",
		"\x05\x01\x00\x05\x01\x00\x01\xcb\x00\x71\x05\x00\x16",
		"\x05\x01\x00\x05\x01\x00\x04\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x50",
		"\x05\x02\x00\x02\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00",
		"\x04\x01\x00\x50\x7f\x00\x00\x01\x00",
	} {
		f.Add([]byte(seed))
	}
	pol := mustPolicy(f, "allowed.test", "203.0.113.0/24", "2001:db8::/32")
	p, err := New(Config{
		Policy: func() *allowlist.Policy { return pol },
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("203.0.113.10")}, nil
		},
		Dial: func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
			if ap.Port() == 22 {
				return nil, errors.New("refused (fuzz)")
			}
			mine, theirs := net.Pipe()
			// net.Pipe has no buffer: read and write at once, as a TCP
			// peer could.
			_ = theirs.SetDeadline(time.Now().Add(time.Second))
			go func() { _, _ = io.Copy(io.Discard, theirs) }()
			go func() {
				_, _ = io.WriteString(theirs, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close, X-A\r\nX-A: b\r\n\r\nok")
				theirs.Close()
			}()
			return mine, nil
		},
		Timeout:     100 * time.Millisecond,
		IdleTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		client, server := net.Pipe()
		go func() {
			_ = client.SetDeadline(time.Now().Add(time.Second))
			_, _ = client.Write(in)
			client.Close()
		}()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if p.track(server, true) {
				defer p.wg.Done()
				p.serveConn(server)
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("handler hung on %q", in)
		}
	})
}
