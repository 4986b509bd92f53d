// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"context"
	"errors"
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
)

// ioTimeout bounds every client-side wait in the tests.
const ioTimeout = 5 * time.Second

// mustPolicy builds a policy from --allow style entries; allow_private
// entries are given with a "private:" prefix.
func mustPolicy(t testing.TB, entries ...string) *allowlist.Policy {
	t.Helper()
	var es []allowlist.Entry
	for _, s := range entries {
		private := strings.HasPrefix(s, "private:")
		e, err := allowlist.ParseEntry(strings.TrimPrefix(s, "private:"))
		if err != nil {
			t.Fatalf("entry %q: %v", s, err)
		}
		e.AllowPrivate = private
		es = append(es, e)
	}
	p, err := allowlist.New(es)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

// fakeResolver answers from a map, records the names asked and fails for
// names it does not know.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	asked   []string
}

func newFakeResolver(m map[string]string) *fakeResolver {
	r := &fakeResolver{answers: make(map[string][]netip.Addr)}
	for name, list := range m {
		r.answers[name] = []netip.Addr{}
		for _, a := range strings.Split(list, ",") {
			if a != "" {
				r.answers[name] = append(r.answers[name], netip.MustParseAddr(a))
			}
		}
	}
	return r
}

var errNoSuchHost = errors.New("no such host (fake resolver)")

func (r *fakeResolver) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	a, ok := r.answers[host]
	if !ok {
		return nil, fmt.Errorf("lookup %s: %w", host, errNoSuchHost)
	}
	return a, nil
}

func (r *fakeResolver) Asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// recorder collects events and dials.
type recorder struct {
	mu     sync.Mutex
	events []Event
	dials  []netip.AddrPort
}

func (r *recorder) event(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) dialed(ap netip.AddrPort) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dials = append(r.dials, ap)
}

func (r *recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

func (r *recorder) Dials() []netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]netip.AddrPort(nil), r.dials...)
}

// waitEvent waits for an event at index from or later that match
// selects: events are emitted by the connection's goroutine, possibly
// after the client saw the reply.
func (r *recorder) waitEvent(t testing.TB, from int, match func(Event) bool) Event {
	t.Helper()
	for end := time.Now().Add(ioTimeout); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		for _, e := range r.Events()[from:] {
			if match(e) {
				return e
			}
		}
	}
	t.Fatalf("no matching event; got %v", r.Events())
	return Event{}
}

// fixture is a proxy on loopback whose upstream dials are redirected: a
// dial to a loopback address is made as asked, any other address is
// recorded and sent to a loopback stand-in (an echo server by default).
// Unit tests therefore never send a packet beyond loopback, whatever the
// fake resolver answers.
type fixture struct {
	p        *Proxy
	addr     string
	rec      *recorder
	resolver *fakeResolver
	policy   func() *allowlist.Policy
	standIn  string // host:port on loopback
}

type fixtureOpts struct {
	policy   *allowlist.Policy
	resolver map[string]string
	standIn  string // default: an echo server
	timeout  time.Duration
}

func newFixture(t testing.TB, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{rec: &recorder{}, resolver: newFakeResolver(o.resolver), standIn: o.standIn}
	if f.standIn == "" {
		f.standIn = startEcho(t)
	}
	pol := o.policy
	f.policy = func() *allowlist.Policy { return pol }
	var d net.Dialer
	p, err := New(Config{
		Policy:  func() *allowlist.Policy { return f.policy() },
		Resolve: f.resolver.Resolve,
		Dial: func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
			f.rec.dialed(ap)
			if allowlist.IsLoopback(ap.Addr()) {
				return d.DialContext(ctx, network, ap.String())
			}
			return d.DialContext(ctx, "tcp", f.standIn)
		},
		OnEvent: f.rec.event,
		Timeout: o.timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.p = p
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = l.Addr().String()
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve returned %v, want ErrClosed", err)
		}
	})
	return f
}

// dial connects a client to the proxy.
func (f *fixture) dial(t testing.TB) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", f.addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes raw request bytes and reads one response.
func (f *fixture) roundTrip(t testing.TB, raw string) (*http.Response, string, net.Conn, *bufio.Reader) {
	t.Helper()
	return roundTripOn(t, f.dial(t), raw)
}

// roundTripOn writes raw request bytes on c and reads one response.
func roundTripOn(t testing.TB, c net.Conn, raw string) (*http.Response, string, net.Conn, *bufio.Reader) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	method, _, _ := strings.Cut(raw, " ")
	resp, body := readResp(t, br, method)
	return resp, body, c, br
}

// readResp reads a response to a request with method (CONNECT responses
// have no body).
func readResp(t testing.TB, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	if resp.StatusCode == http.StatusOK && method == http.MethodConnect {
		return resp, ""
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return resp, string(b)
}

// startEcho serves an echo on loopback: every connection gets its bytes
// back, and a FIN once the client's FIN arrived.
func startEcho(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
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
				_ = c.SetDeadline(time.Now().Add(ioTimeout))
				_, _ = io.Copy(c, c)
				_ = c.(*net.TCPConn).CloseWrite()
			})
		}
	})
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return l.Addr().String()
}

// expectClosed reports whether the peer closed c (EOF or reset) without
// sending anything more.
func expectClosed(t testing.TB, r io.Reader) {
	t.Helper()
	b, err := io.ReadAll(r)
	if len(b) > 0 {
		t.Errorf("got %q after the reply, want the connection closed", b)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Errorf("reading after the reply: %v", err)
	}
}
