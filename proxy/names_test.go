// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/namecheck"
)

// byteRecorder is an upstream stand-in that records every byte it
// receives, per connection, and answers each first read with "ok\n".
type byteRecorder struct {
	addr string
	mu   sync.Mutex
	got  [][]byte
}

func startByteRecorder(t *testing.T) *byteRecorder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &byteRecorder{addr: l.Addr().String()}
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
				r.mu.Lock()
				i := len(r.got)
				r.got = append(r.got, nil)
				r.mu.Unlock()
				buf := make([]byte, 32<<10)
				for answered := false; ; {
					n, err := c.Read(buf)
					r.mu.Lock()
					r.got[i] = append(r.got[i], buf[:n]...)
					r.mu.Unlock()
					if n > 0 && !answered {
						answered = true
						_, _ = io.WriteString(c, "ok\n")
					}
					if err != nil {
						break
					}
				}
			})
		}
	})
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return r
}

// received is everything the upstream received, all connections together.
func (r *byteRecorder) received() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Join(r.got, nil)
}

// clientHello is the first flight crypto/tls sends for SNI sni.
func clientHello(t *testing.T, sni string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		c := tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_ = c.Handshake()
	}()
	buf := make([]byte, 0, namecheck.MaxFlight)
	_ = b.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		n, err := b.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if _, ierr := namecheck.Inspect(buf); ierr == nil || err != nil {
			return buf
		}
	}
}

// verifyPolicy is a policy of entries "host" or "host=verify".
func verifyPolicy(t *testing.T, entries ...string) *allowlist.Policy {
	t.Helper()
	var es []allowlist.Entry
	for _, s := range entries {
		host, v, _ := strings.Cut(s, "=")
		e, err := allowlist.ParseEntry(host)
		if err != nil {
			t.Fatal(err)
		}
		e.Verify = allowlist.Verify(v)
		es = append(es, e)
	}
	p, err := allowlist.New(es)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// connectThen opens a CONNECT tunnel to target, sends first through it
// and returns what came back until the proxy or the upstream ended it,
// and the read's error.
func (f *fixture) connectThen(t *testing.T, target string, first []byte) (string, error) {
	t.Helper()
	resp, _, c, br := f.roundTrip(t, "CONNECT "+target+" HTTP/1.1\r\n\r\n")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s: %s", target, resp.Status)
	}
	if _, err := c.Write(first); err != nil {
		return "", err
	}
	line, err := br.ReadString('\n')
	return line, err
}

// TestTunnelNameChecked: inside a CONNECT tunnel to an allowed name on
// 443 (or 80), the SNI (or Host) must be an allowed name; another name is
// refused with a reset before a byte of it reaches the upstream, and the
// event says what was named and why, in the datapath verifier's words.
func TestTunnelNameChecked(t *testing.T) {
	up := startByteRecorder(t)
	f := newFixture(t, fixtureOpts{
		policy:   verifyPolicy(t, "allowed.test", "*.other.test"),
		resolver: map[string]string{"allowed.test": "203.0.113.10"},
		standIn:  up.addr,
	})
	for _, c := range []struct {
		target string
		first  []byte
		proto  namecheck.Proto
	}{
		{"allowed.test:443", clientHello(t, "evil.example"), namecheck.ProtoTLS},
		{"allowed.test:80", []byte("GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n"), namecheck.ProtoHTTP},
	} {
		from := len(f.rec.Events())
		got, err := f.connectThen(t, c.target, c.first)
		if err == nil || got != "" {
			t.Errorf("%s %s evil.example: got %q, %v; want the tunnel reset", c.target, c.proto, got, err)
		} else if !strings.Contains(err.Error(), "reset") {
			t.Errorf("%s %s evil.example: %v, want a reset", c.target, c.proto, err)
		}
		e := f.rec.waitEvent(t, from, func(e Event) bool { return e.Flight != nil })
		port := c.target[strings.IndexByte(c.target, ':')+1:]
		want := fmt.Sprintf("refused connect to %s (client %v) -> 203.0.113.10:%s (%s evil.example): the address was allowed for allowed.test", c.target, e.Client, port, c.proto)
		if e.Kind != EventRefused || e.Flight.Name != "evil.example" || e.Flight.Proto != c.proto || e.String() != want {
			t.Errorf("event %q (%+v), want %q", e.String(), e, want)
		}
	}
	if b := up.received(); len(b) != 0 {
		t.Fatalf("the upstream received %d bytes of refused tunnels: %q", len(b), b)
	}
	if st := f.p.Stats(); st.Connect.Refused != 2 || st.Connect.Allowed != 0 {
		t.Errorf("stats %+v, want 2 refused tunnels", st.Connect)
	}
	// The allowed name, and another allowed name (a CDN's names share
	// addresses): the first flight reaches the upstream untouched.
	for _, sni := range []string{"allowed.test", "a.other.test"} {
		hello := clientHello(t, sni)
		if got, err := f.connectThen(t, "allowed.test:443", hello); err != nil || got != "ok\n" {
			t.Fatalf("SNI %s: %q, %v", sni, got, err)
		}
		if !bytes.Contains(up.received(), hello) {
			t.Fatalf("SNI %s: the upstream did not receive the ClientHello verbatim", sni)
		}
	}
	if got, err := f.connectThen(t, "allowed.test:80", []byte("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")); err != nil || got != "ok\n" {
		t.Fatalf("Host allowed.test: %q, %v", got, err)
	}
}

// TestSOCKS5TunnelNameChecked: the same in a SOCKS5 tunnel.
func TestSOCKS5TunnelNameChecked(t *testing.T) {
	up := startByteRecorder(t)
	f := newFixture(t, fixtureOpts{
		policy:   verifyPolicy(t, "allowed.test"),
		resolver: map[string]string{"allowed.test": "2001:db8:2::10"},
		standIn:  up.addr,
	})
	run := func(sni string) ([]byte, error) {
		c := f.dial(t)
		if _, err := c.Write(append(append([]byte(nil), greetNoAuth...), socksRequest(1, "allowed.test", 443)...)); err != nil {
			t.Fatal(err)
		}
		reply := make([]byte, 2+10) // the method, then success with an IPv4 bound address
		if _, err := io.ReadFull(c, reply); err != nil || reply[3] != socksSucceeded {
			t.Fatalf("SOCKS5 reply %x, %v", reply, err)
		}
		if _, err := c.Write(clientHello(t, sni)); err != nil {
			return nil, err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		return []byte(line), err
	}
	if got, err := run("evil.example"); err == nil || len(got) != 0 {
		t.Errorf("SNI evil.example through SOCKS5: %q, %v; want a reset", got, err)
	}
	e := f.rec.waitEvent(t, 0, func(e Event) bool { return e.Flight != nil })
	if e.Protocol != ProtoSOCKS5 || !strings.HasSuffix(e.String(), "-> [2001:db8:2::10]:443 (TLS SNI evil.example): the address was allowed for allowed.test") {
		t.Errorf("event %q", e.String())
	}
	if b := up.received(); len(b) != 0 {
		t.Fatalf("the upstream received %q", b)
	}
	if got, _ := run("allowed.test"); string(got) != "ok\n" {
		t.Fatalf("SNI allowed.test through SOCKS5: %q", got)
	}
}

// TestTunnelVerifyRules: which tunnels are checked follows the entry's
// "verify" as in the datapath: by default every port, a TLS ClientHello
// or an HTTP head judged by its name and anything else passing but on 80
// and 443; "name" every port, TLS or HTTP only; "address" none; and an
// address that an IP or CIDR entry allows, or an IP literal, by address.
// A strictly checked tunnel whose client says nothing is refused when
// Config.Timeout runs out.
func TestTunnelVerifyRules(t *testing.T) {
	up := startByteRecorder(t)
	f := newFixture(t, fixtureOpts{
		policy: verifyPolicy(t, "allowed.test", "strict.test=name", "loose.test=address", "covered.test", "198.51.100.0/24"),
		resolver: map[string]string{"allowed.test": "203.0.113.10", "strict.test": "203.0.113.11", "loose.test": "203.0.113.12",
			"covered.test": "198.51.100.7"},
		standIn: up.addr,
		timeout: 300 * time.Millisecond,
	})
	banner := []byte("SSH-2.0-probe\r\n")
	evil := clientHello(t, "evil.example")
	evilHTTP := []byte("\r\nPROPFIND / HTTP/1.1\r\nHost: evil.example\r\n\r\n")
	goodHTTP := []byte("GET / HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n")
	for _, c := range []struct {
		target string
		first  []byte
		pass   bool
		reason string
	}{
		{"allowed.test:22", banner, true, ""},
		{"allowed.test:8443", evil, false, "(TLS SNI evil.example): the address was allowed for allowed.test"},
		{"allowed.test:8080", evilHTTP, false, "(HTTP Host evil.example): the address was allowed for allowed.test"},
		{"allowed.test:8080", goodHTTP, true, ""},
		{"allowed.test:5432", []byte("\x00\x00\x00\x08\x04\xd2\x16\x2f"), true, ""},
		{"strict.test:22", banner, false, "(no host name): the first bytes are neither a TLS ClientHello nor an HTTP/1 request; the address was allowed for strict.test"},
		{"strict.test:8443", evil, false, "(TLS SNI evil.example): the address was allowed for strict.test"},
		{"loose.test:443", evil, true, ""},
		{"covered.test:443", evil, true, ""},
		{"198.51.100.7:443", evil, true, ""},
		{"allowed.test:443", []byte{}, false, "(no host name): the client sent no complete first flight within 300ms; the address was allowed for allowed.test"},
	} {
		from := len(f.rec.Events())
		var got string
		var err error
		if len(c.first) == 0 {
			// A client that waits for the server to speak first.
			_, _, conn, br := f.roundTrip(t, "CONNECT "+c.target+" HTTP/1.1\r\n\r\n")
			_ = conn.SetReadDeadline(time.Now().Add(ioTimeout))
			got, err = br.ReadString('\n')
		} else {
			got, err = f.connectThen(t, c.target, c.first)
		}
		if c.pass {
			if err != nil || got != "ok\n" {
				t.Errorf("%s: %q, %v; want the tunnel through", c.target, got, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: %q; want the tunnel reset", c.target, got)
			continue
		}
		e := f.rec.waitEvent(t, from, func(e Event) bool { return e.Flight != nil })
		if !strings.HasSuffix(e.String(), c.reason) {
			t.Errorf("%s: event %q, want it to end in %q", c.target, e.String(), c.reason)
		}
	}
	if b := up.received(); bytes.Count(b, banner) != 1 {
		t.Errorf("the upstream received the banner %d times, want once (allowed.test:22)", bytes.Count(b, banner))
	}
	if n := bytes.Count(up.received(), evil); n != 3 {
		t.Errorf("the upstream received the evil.example ClientHello %d times, want 3 (the unchecked tunnels)", n)
	}
	if bytes.Contains(up.received(), []byte("evil.example\r\n")) {
		t.Error("the upstream received the request for evil.example")
	}
}

// TestTunnelNameCheckKeepsPipelinedBytes: bytes the client sent after
// its first flight, before the check was done, follow it in order.
func TestTunnelNameCheckKeepsPipelinedBytes(t *testing.T) {
	up := startByteRecorder(t)
	f := newFixture(t, fixtureOpts{
		policy:   verifyPolicy(t, "allowed.test"),
		resolver: map[string]string{"allowed.test": "203.0.113.10"},
		standIn:  up.addr,
	})
	req := "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
	c := f.dial(t)
	if _, err := io.WriteString(c, "CONNECT allowed.test:80 HTTP/1.1\r\n\r\n"+req+req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if resp, _ := readResp(t, br, http.MethodConnect); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s", resp.Status)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	if got, err := io.ReadAll(br); err != nil || string(got) != "ok\n" {
		t.Fatalf("%q, %v", got, err)
	}
	for end := time.Now().Add(ioTimeout); time.Now().Before(end) && len(up.received()) < 2*len(req); time.Sleep(5 * time.Millisecond) {
	}
	if got := string(up.received()); got != req+req {
		t.Fatalf("the upstream received %q, want both requests in order", got)
	}
}

// TestTunnelServerSpeaksFirst: on a port where other protocols pass, a
// server that speaks first (SSH, SMTP, a database) is heard before the
// client has sent anything, and the client's answer is judged and passes.
func TestTunnelServerSpeaksFirst(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(ioTimeout))
		_, _ = io.WriteString(c, "SSH-2.0-server\r\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		got <- line
	}()
	f := newFixture(t, fixtureOpts{
		policy:   verifyPolicy(t, "allowed.test"),
		resolver: map[string]string{"allowed.test": "203.0.113.10"},
		standIn:  l.Addr().String(),
		timeout:  300 * time.Millisecond,
	})
	_, _, c, br := f.roundTrip(t, "CONNECT allowed.test:22 HTTP/1.1\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	banner, err := br.ReadString('\n')
	if err != nil || banner != "SSH-2.0-server\r\n" {
		t.Fatalf("banner %q, %v: want the server's, before the client spoke", banner, err)
	}
	// Longer than Config.Timeout: the client's wait is its own here.
	time.Sleep(400 * time.Millisecond)
	if _, err := io.WriteString(c, "SSH-2.0-client\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-got:
		if line != "SSH-2.0-client\r\n" {
			t.Errorf("the server read %q", line)
		}
	case <-time.After(ioTimeout):
		t.Fatal("the client's banner never reached the server")
	}
}
