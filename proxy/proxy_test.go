// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
)

func TestNewRejectsNegativeTimeouts(t *testing.T) {
	if _, err := New(Config{Timeout: -1}); err == nil {
		t.Error("negative Timeout accepted")
	}
	if _, err := New(Config{IdleTimeout: -1}); err == nil {
		t.Error("negative IdleTimeout accepted")
	}
}

// TestCloseEndsTunnels: Close stops Serve and ends open tunnels, so a
// session that ends takes its connections along.
func TestCloseEndsTunnels(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	_, port, _ := net.SplitHostPort(f.standIn)
	resp, _, c, br := f.roundTrip(t, "CONNECT 127.0.0.1:"+port+" HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	// The tunnel is counted as allowed after its first flight's check,
	// which follows the 200: the client can read the answer first.
	st := f.p.Stats()
	for deadline := time.Now().Add(ioTimeout); st.Connect.Allowed == 0 && time.Now().Before(deadline); st = f.p.Stats() {
		time.Sleep(5 * time.Millisecond)
	}
	if st.Active != 1 || st.Connect.Allowed != 1 {
		t.Errorf("stats %+v", st)
	}
	done := make(chan error, 1)
	go func() { done <- f.p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(ioTimeout):
		t.Fatal("Close did not return")
	}
	if _, err := io.ReadAll(br); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Errorf("tunnel after Close: %v", err)
	}
	if _, err := c.Write([]byte("x")); err == nil {
		// One write may still succeed before the reset arrives.
		time.Sleep(50 * time.Millisecond)
		if _, err := c.Write([]byte("x")); err == nil {
			t.Error("tunnel still open after Close")
		}
	}
	if st := f.p.Stats(); st.Active != 0 {
		t.Errorf("active %d after Close", st.Active)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.p.Serve(l); !errors.Is(err, ErrClosed) {
		t.Errorf("Serve after Close: %v", err)
	}
}

// TestPolicySwap: the policy is read for every request, so a keep-alive
// connection sees a new policy at its next request, and a tunnel opened
// under the old one stays up.
func TestPolicySwap(t *testing.T) {
	o := &origin{}
	f := newFixture(t, fixtureOpts{
		policy:   mustPolicy(t, "allowed.test"),
		resolver: map[string]string{"allowed.test": "203.0.113.10", "later.test": "203.0.113.11"},
		standIn:  startOrigin(t, o),
	})
	c := f.dial(t)
	br := bufio.NewReader(c)
	io.WriteString(c, "GET http://allowed.test/1 HTTP/1.1\r\n\r\n")
	if resp, _ := readResp(t, br, "GET"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	next := mustPolicy(t, "later.test")
	f.policy = func() *allowlist.Policy { return next }
	io.WriteString(c, "GET http://later.test/2 HTTP/1.1\r\n\r\n")
	if resp, body := readResp(t, br, "GET"); resp.StatusCode != 200 || body != "hello from /2" {
		t.Fatalf("%s %q", resp.Status, body)
	}
	io.WriteString(c, "GET http://allowed.test/3 HTTP/1.1\r\n\r\n")
	if resp, _ := readResp(t, br, "GET"); resp.StatusCode != 403 {
		t.Fatalf("old policy still applied: %s", resp.Status)
	}
}

// TestStatsAndEvents: counters per protocol, and the event line a user
// reads.
func TestStatsAndEvents(t *testing.T) {
	f := newFixture(t, fixtureOpts{
		policy:   mustPolicy(t, "allowed.test"),
		resolver: map[string]string{"allowed.test": "203.0.113.10"},
	})
	// A tunnel to 443 counts once its first bytes carried a name; one to
	// another port when it opens.
	_, _, tunnel, _ := f.roundTrip(t, "CONNECT allowed.test:8443 HTTP/1.1\r\n\r\n")
	tunnel.Close()
	f.roundTrip(t, "CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
	f.roundTrip(t, "CONNECT http://x/ HTTP/1.1\r\n\r\n")
	f.roundTrip(t, "GET http://evil.example/ HTTP/1.1\r\n\r\n")
	c := f.dial(t)
	c.Write(append(greetNoAuth, socksRequest(1, "evil.example", 443)...))
	io.ReadAll(c)

	e := f.rec.waitEvent(t, 0, func(e Event) bool { return e.Protocol == ProtoConnect && e.Kind == EventRefused })
	if e.Host != "evil.example" || e.Port != 443 || !e.Client.Addr().IsLoopback() || e.Time.IsZero() {
		t.Errorf("event %+v", e)
	}
	want := fmt.Sprintf("refused connect to evil.example:443 (client %v): evil.example is not in the allowlist", e.Client)
	if e.String() != want {
		t.Errorf("event line %q, want %q", e.String(), want)
	}
	e = f.rec.waitEvent(t, 0, func(e Event) bool { return e.Protocol == ProtoHTTP })
	if !strings.HasPrefix(e.String(), "refused http GET to evil.example:80 ") {
		t.Errorf("event line %q", e.String())
	}
	f.rec.waitEvent(t, 0, func(e Event) bool { return e.Protocol == ProtoSOCKS5 })

	var st Stats
	for end := time.Now().Add(ioTimeout); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if st = f.p.Stats(); st.Active == 0 {
			break
		}
	}
	want1 := Stats{
		Connect:   Counters{Allowed: 1, Refused: 1},
		HTTP:      Counters{Refused: 1},
		SOCKS5:    Counters{Refused: 1},
		Malformed: 1,
	}
	if st.Connect != want1.Connect || st.HTTP != want1.HTTP || st.SOCKS5 != want1.SOCKS5 || st.Malformed != 1 || st.Active != 0 {
		t.Errorf("stats %+v, want %+v", st, want1)
	}
}

// TestAdmit: a client the Admit hook refuses gets nothing.
func TestAdmit(t *testing.T) {
	var events []Event
	p, err := New(Config{
		Admit:   func(c net.Conn) error { return errors.New("peer is not in this session") },
		OnEvent: func(e Event) { events = append(events, e) },
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(l)
	defer p.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	io.WriteString(c, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")
	if b, _ := io.ReadAll(c); len(b) > 0 {
		t.Errorf("refused client got %q", b)
	}
	p.Close()
	if len(events) != 1 || events[0].Kind != EventRefused || !strings.Contains(events[0].Reason, "not in this session") {
		t.Errorf("events %v", events)
	}
}

// TestLoopbackTargets: loopback is allowed with an empty policy, by
// address and by localhost name, over each protocol.
func TestLoopbackTargets(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	ap := netip.MustParseAddrPort(f.standIn)
	port := fmt.Sprint(ap.Port())
	for _, req := range []string{
		"CONNECT 127.0.0.1:" + port + " HTTP/1.1\r\n\r\n",
		"CONNECT localhost:" + port + " HTTP/1.1\r\n\r\n",
		"CONNECT [::ffff:127.0.0.1]:" + port + " HTTP/1.1\r\n\r\n",
	} {
		resp, _, c, br := f.roundTrip(t, req)
		if resp.StatusCode != 200 {
			t.Errorf("%q: %s", req, resp.Status)
			continue
		}
		io.WriteString(c, "x")
		c.(*net.TCPConn).CloseWrite()
		if b, _ := io.ReadAll(br); string(b) != "x" {
			t.Errorf("%q: echo %q", req, b)
		}
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		c := f.dial(t)
		c.Write(append(greetNoAuth, socksRequest(1, host, ap.Port())...))
		r := make([]byte, 12)
		if _, err := io.ReadFull(c, r); err != nil || r[3] != 0 {
			t.Errorf("SOCKS5 %s: %x %v", host, r, err)
		}
	}
	if d := f.rec.Dials(); !slices.ContainsFunc(d, func(a netip.AddrPort) bool { return a.Addr() == netip.MustParseAddr("127.0.0.1") }) {
		t.Errorf("dials %v", d)
	}
}

func TestEnv(t *testing.T) {
	got := Env(netip.MustParseAddrPort("127.0.0.1:3128"))
	want := []string{
		"HTTP_PROXY=http://127.0.0.1:3128",
		"HTTPS_PROXY=http://127.0.0.1:3128",
		"ALL_PROXY=socks5h://127.0.0.1:3128",
		"NO_PROXY=localhost,127.0.0.1,::1",
		"http_proxy=http://127.0.0.1:3128",
		"https_proxy=http://127.0.0.1:3128",
		"all_proxy=socks5h://127.0.0.1:3128",
		"no_proxy=localhost,127.0.0.1,::1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Env = %q, want %q", got, want)
	}
	if got := Env(netip.MustParseAddrPort("[::1]:3128")); got[0] != "HTTP_PROXY=http://[::1]:3128" || got[2] != "ALL_PROXY=socks5h://[::1]:3128" {
		t.Errorf("IPv6 Env = %q", got)
	}
}
