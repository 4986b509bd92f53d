// SPDX-License-Identifier: Apache-2.0

//go:build linux

package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/tests/world"
)

// settle is how long a containment test waits for packets in flight
// before asserting that none arrived.
const settle = 200 * time.Millisecond

// worldProxy is a proxy whose listener and upstream sockets live in the
// test world's client namespace, so the world's sniffer sees everything it
// sends. A socket belongs to the namespace of the thread that created it:
// the listener is created inside w.InClient, and Dial opens each upstream
// socket on a fresh thread inside the client namespace (w.InClient per
// dial). The proxy's own goroutines may then run anywhere.
type worldProxy struct {
	w    *world.World
	p    *Proxy
	addr string
	rec  *recorder
}

// The fake resolver's data. The rebinding answers are only data: the proxy
// must refuse them before dialling, and the test dialer would refuse them
// too (they are outside the test's address ranges).
var worldNames = map[string]string{
	"allowed.test":        world.AllowedV4.String(),
	"allowed6.test":       world.AllowedV6.String(),
	"dual.test":           world.AllowedV4.String() + "," + world.AllowedV6.String(),
	"denied.test":         world.DeniedV4.String(),
	"rebind-loop.test":    "127.0.0.1",
	"rebind-private.test": "10.0.0.5",
	"rebind-meta.test":    "169.254.169.254",
}

func newWorldProxy(t *testing.T, pol *allowlist.Policy) *worldProxy {
	t.Helper()
	w := world.New(t) // skips unless root
	wp := &worldProxy{w: w, rec: &recorder{}}
	resolver := newFakeResolver(worldNames)
	var d net.Dialer
	p, err := New(Config{
		Policy:  func() *allowlist.Policy { return pol },
		Resolve: resolver.Resolve,
		Dial: func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
			wp.rec.dialed(ap)
			if !world.Safe(ap.Addr()) {
				return nil, fmt.Errorf("test dialer: %v is outside the test's address ranges", ap)
			}
			var c net.Conn
			err := w.InClient(func() (err error) {
				c, err = d.DialContext(ctx, network, ap.String())
				return err
			})
			return c, err
		},
		OnEvent: wp.rec.event,
		Timeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	wp.p = p
	var l net.Listener
	if err := w.InClient(func() (err error) {
		l, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	wp.addr = l.Addr().String()
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	t.Cleanup(func() {
		p.Close()
		<-done
	})
	return wp
}

// dial connects a client to the proxy from inside the client namespace.
func (wp *worldProxy) dial(t testing.TB) net.Conn {
	t.Helper()
	var c net.Conn
	if err := wp.w.InClient(func() (err error) {
		c, err = net.DialTimeout("tcp", wp.addr, ioTimeout)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	t.Cleanup(func() { c.Close() })
	return c
}

// listenHTTP serves HTTP on a world host; the handler says where it is.
func listenHTTP(t *testing.T, w *world.World, addr netip.Addr) uint16 {
	t.Helper()
	var l net.Listener
	if err := w.InWorld(func() (err error) {
		l, err = net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(rw, "world %s %s %s", addr, r.Host, r.URL.Path)
		}),
		ReadHeaderTimeout: ioTimeout,
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

// recordingServer is a world TCP server that keeps every byte each
// connection sent, to show where tunnel data went.
type recordingServer struct {
	mu   sync.Mutex
	got  [][]byte
	done chan struct{} // one per connection that ended
}

func listenRecording(t *testing.T, w *world.World, addr netip.Addr) (uint16, *recordingServer) {
	t.Helper()
	var l net.Listener
	if err := w.InWorld(func() (err error) {
		l, err = net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rs := &recordingServer{done: make(chan struct{}, 16)}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(ioTimeout))
				io.WriteString(c, world.Greeting)
				b, _ := io.ReadAll(c)
				rs.mu.Lock()
				rs.got = append(rs.got, b)
				rs.mu.Unlock()
				rs.done <- struct{}{}
			})
		}
	})
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return uint16(l.Addr().(*net.TCPAddr).Port), rs
}

// readAllTunnel closes the client's sending side and reads to EOF.
func readAllTunnel(t testing.TB, c net.Conn, r io.Reader) string {
	t.Helper()
	_ = c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading the tunnel: %v", err)
	}
	return string(b)
}

// socksConnect runs a SOCKS5 CONNECT and returns the reply code.
func socksConnect(t testing.TB, c net.Conn, host string, port uint16) byte {
	t.Helper()
	if _, err := c.Write(append(append([]byte{}, greetNoAuth...), socksRequest(socksCmdConnect, host, port)...)); err != nil {
		t.Fatal(err)
	}
	var r [4]byte
	if _, err := io.ReadFull(c, r[:2]); err != nil || r[1] != 0 {
		t.Fatalf("SOCKS5 method reply %x: %v", r[:2], err)
	}
	if _, err := io.ReadFull(c, r[:]); err != nil {
		t.Fatalf("SOCKS5 reply: %v", err)
	}
	n := map[byte]int{socksAtypIPv4: 4, socksAtypIPv6: 16}[r[3]]
	if _, err := io.ReadFull(c, make([]byte, n+2)); err != nil {
		t.Fatalf("SOCKS5 reply address: %v", err)
	}
	return r[1]
}

func worldPolicy(t testing.TB) *allowlist.Policy {
	return mustPolicy(t, "allowed.test", "allowed6.test", "dual.test",
		"rebind-loop.test", "rebind-private.test", "rebind-meta.test",
		world.AllowedV6Prefix.String())
}

// TestWorldAllowed: an allowed name reaches the world's server through
// CONNECT, absolute-form HTTP and SOCKS5, over IPv4 and IPv6. These are
// the positive twins of TestWorldRefused: same proxy, same world.
func TestWorldAllowed(t *testing.T) {
	wp := newWorldProxy(t, worldPolicy(t))
	w := wp.w
	port4 := w.ListenTCP(t, world.AllowedV4)
	port6 := w.ListenTCP(t, world.AllowedV6)
	http4 := listenHTTP(t, w, world.AllowedV4)

	arrived := func(t *testing.T, a netip.Addr, port uint16, start time.Time) {
		t.Helper()
		if !w.WaitArrival(world.All(world.Since(start), world.ToPort(a, port)), ioTimeout) {
			t.Errorf("nothing arrived at %v", netip.AddrPortFrom(a, port))
		}
	}

	t.Run("connect", func(t *testing.T) {
		for _, tc := range []struct {
			host string
			addr netip.Addr
			port uint16
		}{
			{"allowed.test", world.AllowedV4, port4},
			{"Allowed.TEST.", world.AllowedV4, port4},
			{"allowed6.test", world.AllowedV6, port6},
			{"[" + world.AllowedV6.String() + "]", world.AllowedV6, port6}, // CIDR entry
		} {
			start := time.Now()
			req := fmt.Sprintf("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", tc.host, tc.port, tc.host, tc.port)
			resp, body, c, br := roundTripOn(t, wp.dial(t), req)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %s %q", tc.host, resp.Status, body)
			}
			if got := readAllTunnel(t, c, br); got != world.Greeting {
				t.Errorf("%s: the world said %q, want %q", tc.host, got, world.Greeting)
			}
			arrived(t, tc.addr, tc.port, start)
		}
	})

	t.Run("http", func(t *testing.T) {
		start := time.Now()
		c := wp.dial(t)
		br := bufio.NewReader(c)
		for _, path := range []string{"/one", "/two"} {
			fmt.Fprintf(c, "GET http://allowed.test:%d%s HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", http4, path, http4)
			resp, body := readResp(t, br, "GET")
			want := fmt.Sprintf("world %s allowed.test:%d %s", world.AllowedV4, http4, path)
			if resp.StatusCode != 200 || body != want {
				t.Fatalf("%s %q, want %q", resp.Status, body, want)
			}
		}
		arrived(t, world.AllowedV4, http4, start)
	})

	t.Run("socks5", func(t *testing.T) {
		for _, tc := range []struct {
			host string
			addr netip.Addr
			port uint16
		}{
			{"allowed.test", world.AllowedV4, port4},
			{"allowed6.test", world.AllowedV6, port6},
			{world.AllowedV6.String(), world.AllowedV6, port6}, // IPv6 ATYP, CIDR entry
		} {
			start := time.Now()
			c := wp.dial(t)
			if code := socksConnect(t, c, tc.host, tc.port); code != socksSucceeded {
				t.Fatalf("%s: SOCKS5 reply %#x", tc.host, code)
			}
			if got := readAllTunnel(t, c, c); got != world.Greeting {
				t.Errorf("%s: the world said %q", tc.host, got)
			}
			arrived(t, tc.addr, tc.port, start)
		}
	})

	if st := wp.p.Stats(); st.Connect.Allowed != 4 || st.HTTP.Allowed != 2 || st.SOCKS5.Allowed != 3 {
		t.Errorf("stats %+v", st)
	}
	for _, e := range wp.rec.Events() {
		t.Errorf("event on the allowed path: %v", e)
	}
}

// TestWorldRefused: denied names, uncovered IP literals, rebinding names,
// relayed CONNECTs and malformed requests get their documented refusal,
// nothing is dialled, and the world's sniffer records nothing.
func TestWorldRefused(t *testing.T) {
	wp := newWorldProxy(t, worldPolicy(t))
	w := wp.w
	deniedPort := w.ListenTCP(t, world.DeniedV4)
	denied6Port := w.ListenTCP(t, world.DeniedV6)
	allowedPort := w.ListenTCP(t, world.AllowedV4)
	deniedHTTP := listenHTTP(t, w, world.DeniedV4)

	toDenied := world.Any(world.To(world.DeniedV4), world.To(world.DeniedV6))
	anything := world.Everything
	d4 := world.DeniedV4.String()

	type exchange struct {
		http   string // raw HTTP request
		socks  string // SOCKS5 CONNECT host (port from the case)
		socks4 bool
	}
	for _, tc := range []struct {
		name    string
		ex      exchange
		port    uint16
		status  int
		socks   byte
		body    string
		nothing world.Filter
	}{
		// Denied names, by each protocol.
		{name: "connect denied name", ex: exchange{http: "CONNECT denied.test:%d HTTP/1.1\r\nHost: denied.test:%[1]d\r\n\r\n"}, port: deniedPort,
			status: 403, body: "sluice: CONNECT to denied.test:%d refused: denied.test is not in the allowlist", nothing: toDenied},
		{name: "http denied name", ex: exchange{http: "GET http://denied.test:%d/ HTTP/1.1\r\nHost: denied.test:%[1]d\r\n\r\n"}, port: deniedHTTP,
			status: 403, body: "sluice: GET to denied.test:%d refused: denied.test is not in the allowlist", nothing: toDenied},
		{name: "socks5 denied name", ex: exchange{socks: "denied.test"}, port: deniedPort, socks: socksNotAllowed, nothing: toDenied},

		// IP literals no CIDR entry covers.
		{name: "connect IP literal", ex: exchange{http: "CONNECT " + d4 + ":%d HTTP/1.1\r\n\r\n"}, port: deniedPort,
			status: 403, body: "sluice: CONNECT to " + d4 + ":%d refused: " + d4 + " is an IP address that no allowlist entry covers", nothing: toDenied},
		{name: "connect IPv6 literal", ex: exchange{http: "CONNECT [" + world.DeniedV6.String() + "]:%d HTTP/1.1\r\n\r\n"}, port: denied6Port,
			status: 403, body: "no allowlist entry covers", nothing: toDenied},
		{name: "http IP literal", ex: exchange{http: "GET http://" + d4 + ":%d/ HTTP/1.1\r\n\r\n"}, port: deniedHTTP,
			status: 403, body: "no allowlist entry covers", nothing: toDenied},
		{name: "socks5 IPv4", ex: exchange{socks: d4}, port: deniedPort, socks: socksNotAllowed, nothing: toDenied},
		{name: "socks5 IPv6", ex: exchange{socks: world.DeniedV6.String()}, port: denied6Port, socks: socksNotAllowed, nothing: toDenied},
		{name: "socks5 IP as domain", ex: exchange{socks: "::ffff:" + d4}, port: deniedPort, socks: socksNotAllowed, nothing: toDenied},

		// Rebinding: allowed names whose only answers point inside.
		{name: "rebinding loopback", ex: exchange{http: "CONNECT rebind-loop.test:%d HTTP/1.1\r\n\r\n"}, port: 22,
			status: 403, body: "rebind-loop.test resolves only to addresses sluice refuses: 127.0.0.1 (loopback)", nothing: anything},
		{name: "rebinding private", ex: exchange{http: "GET http://rebind-private.test:%d/ HTTP/1.1\r\n\r\n"}, port: 80,
			status: 403, body: "10.0.0.5 (private (RFC 1918))", nothing: anything},
		{name: "rebinding metadata", ex: exchange{socks: "rebind-meta.test"}, port: 80, socks: socksNotAllowed, nothing: anything},

		// Relayed or smuggled targets.
		{name: "connect absolute URI", ex: exchange{http: "CONNECT http://" + d4 + ":%d/ HTTP/1.1\r\n\r\n"}, port: deniedPort,
			status: 400, body: "must be host:port", nothing: anything},
		{name: "connect host mismatch", ex: exchange{http: "CONNECT allowed.test:" + fmt.Sprint(allowedPort) + " HTTP/1.1\r\nHost: " + d4 + ":%d\r\n\r\n"}, port: deniedPort,
			status: 400, body: "different authority", nothing: anything},
		{name: "connect userinfo", ex: exchange{http: "CONNECT allowed.test@" + d4 + ":%d HTTP/1.1\r\n\r\n"}, port: deniedPort,
			status: 400, body: "userinfo", nothing: anything},
		{name: "http host mismatch", ex: exchange{http: "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: " + d4 + "\r\n\r\n"}, port: deniedHTTP,
			status: 400, body: "different authority", nothing: anything},
		{name: "http smuggled body", ex: exchange{http: "POST http://allowed.test:%d/ HTTP/1.1\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET http://" + d4 + "/ HTTP/1.1\r\n\r\n"}, port: deniedHTTP,
			status: 400, body: "ambiguous framing", nothing: anything},

		// Malformed.
		{name: "origin-form", ex: exchange{http: "GET / HTTP/1.1\r\nHost: " + d4 + ":%d\r\n\r\n"}, port: deniedHTTP,
			status: 400, body: "not a web server", nothing: anything},
		{name: "garbage", ex: exchange{http: "\x16\x03\x01 %d garbage\r\n\r\n"}, port: 0, status: 400, body: "malformed request line", nothing: anything},
		{name: "socks4", ex: exchange{socks4: true}, port: deniedPort, nothing: anything},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			dials := len(wp.rec.Dials())
			c := wp.dial(t)
			switch {
			case tc.ex.http != "":
				resp, body, _, br := roundTripOn(t, c, fmt.Sprintf(tc.ex.http, tc.port))
				want := tc.body
				if strings.Contains(want, "%d") {
					want = fmt.Sprintf(want, tc.port)
				}
				if resp.StatusCode != tc.status || !strings.Contains(body, want) {
					t.Errorf("%s %q, want %d containing %q", resp.Status, body, tc.status, want)
				}
				expectClosed(t, br)
			case tc.ex.socks4:
				c.Write([]byte{4, 1, byte(tc.port >> 8), byte(tc.port), 203, 0, 113, 20, 0})
				if b, _ := io.ReadAll(c); !bytes.Equal(b, []byte{0, 0x5b, 0, 0, 0, 0, 0, 0}) {
					t.Errorf("SOCKS4 answered %x", b)
				}
			default:
				if code := socksConnect(t, c, tc.ex.socks, tc.port); code != tc.socks {
					t.Errorf("SOCKS5 reply %#x, want %#x", code, tc.socks)
				}
				expectClosed(t, c)
			}
			if d := wp.rec.Dials()[dials:]; len(d) > 0 {
				t.Errorf("the proxy dialled %v", d)
			}
			w.AssertNothingArrived(t, world.All(world.Since(start), tc.nothing), settle)
		})
	}
	if st := wp.p.Stats(); st.Connect.Allowed+st.HTTP.Allowed+st.SOCKS5.Allowed != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestWorldTunnelNotParsed: a second CONNECT sent inside an allowed tunnel,
// pipelined with the first or sent after the 200, goes to the tunnel's
// destination as data; the second target sees nothing. The entry is judged
// by address: on a name's address the tunnel's first bytes are judged as
// HTTP (names_test.go), and a CONNECT head's authority-form target is
// refused there.
func TestWorldTunnelNotParsed(t *testing.T) {
	wp := newWorldProxy(t, verifyPolicy(t, "allowed.test=address"))
	w := wp.w
	deniedPort := w.ListenTCP(t, world.DeniedV4)
	recPort, rs := listenRecording(t, w, world.AllowedV4)

	start := time.Now()
	second := fmt.Sprintf("CONNECT %s:%d HTTP/1.1\r\nHost: %[1]s:%[2]d\r\n\r\n", world.DeniedV4, deniedPort)
	c := wp.dial(t)
	fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n%s", recPort, second)
	br := bufio.NewReader(c)
	if resp, _ := readResp(t, br, http.MethodConnect); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	third := "CONNECT denied.test:443 HTTP/1.1\r\n\r\n"
	io.WriteString(c, third)
	if got := readAllTunnel(t, c, br); got != world.Greeting {
		t.Errorf("the tunnel answered %q", got)
	}
	select {
	case <-rs.done:
	case <-time.After(ioTimeout):
		t.Fatal("the recording server saw no end of the connection")
	}
	rs.mu.Lock()
	got := rs.got
	rs.mu.Unlock()
	if len(got) != 1 || string(got[0]) != second+third {
		t.Errorf("the tunnel's destination got %q, want %q", got, second+third)
	}
	if d := wp.rec.Dials(); len(d) != 1 || d[0] != netip.AddrPortFrom(world.AllowedV4, recPort) {
		t.Errorf("dials %v", d)
	}
	w.AssertNothingArrived(t, world.All(world.Since(start), world.To(world.DeniedV4)), settle)
}

// TestWorldLoopback: loopback destinations in the client namespace are
// allowed with an empty policy, and nothing goes to the world.
func TestWorldLoopback(t *testing.T) {
	wp := newWorldProxy(t, nil)
	w := wp.w
	var l4, l6 net.Listener
	if err := w.InClient(func() (err error) {
		if l4, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
			return err
		}
		l6, err = net.Listen("tcp6", "[::1]:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []net.Listener{l4, l6} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				io.WriteString(c, "loopback\n")
				c.Close()
			}
		}()
		t.Cleanup(func() { l.Close() })
	}
	p4 := uint16(l4.Addr().(*net.TCPAddr).Port)
	p6 := uint16(l6.Addr().(*net.TCPAddr).Port)

	start := time.Now()
	for _, target := range []string{
		fmt.Sprintf("127.0.0.1:%d", p4),
		fmt.Sprintf("localhost:%d", p4),
		fmt.Sprintf("[::1]:%d", p6),
		fmt.Sprintf("[::ffff:127.0.0.1]:%d", p4),
	} {
		resp, body, c, br := roundTripOn(t, wp.dial(t), "CONNECT "+target+" HTTP/1.1\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Errorf("%s: %s %q", target, resp.Status, body)
			continue
		}
		if got := readAllTunnel(t, c, br); got != "loopback\n" {
			t.Errorf("%s: got %q", target, got)
		}
	}
	c := wp.dial(t)
	if code := socksConnect(t, c, "127.0.0.1", p4); code != socksSucceeded {
		t.Errorf("SOCKS5 to loopback: %#x", code)
	}
	// The twin: the same empty policy refuses the world.
	resp, _, _, _ := roundTripOn(t, wp.dial(t), "CONNECT allowed.test:443 HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 403 {
		t.Errorf("allowed.test with an empty policy: %s", resp.Status)
	}
	w.AssertNothingArrived(t, world.Since(start), settle)
}
