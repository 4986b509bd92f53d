// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dialAPI connects to the daemon's socket as the test (root).
func (f *fixture) dialAPI(t *testing.T) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: f.sock, Net: "unix"})
	if err != nil {
		t.Fatalf("connect to %s: %v", f.sock, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitClosed waits (bounded) until the daemon closes c, and reports what
// it sent before.
func waitClosed(t *testing.T, c net.Conn, within time.Duration) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(within))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the daemon kept a connection open for %v (got %q)", within, b)
	}
	return string(b)
}

// assertNoPanic fails if the daemon logged a panic.
func (f *fixture) assertNoPanic(t *testing.T) {
	t.Helper()
	if out := f.log.String(); strings.Contains(out, "panic") {
		t.Errorf("the daemon logged a panic:\n%s", out)
	}
}

// TestSilentClientsLeaveNoPanic: a client that connects and sends nothing
// until the header timeout, one that half-closes at once, and an idle
// keep-alive connection and a silent one still open when the daemon
// stops, each end without the daemon logging a panic (the connection's
// Read once passed on the -1 that recvmsg returns on a timeout or close,
// and bufio panicked on it).
func TestSilentClientsLeaveNoPanic(t *testing.T) {
	f := newFixture(t)
	silent := f.dialAPI(t)
	half := f.dialAPI(t)
	if err := half.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got := waitClosed(t, half, 5*time.Second); got != "" {
		t.Errorf("a half-closed client without a request got %q", got)
	}
	start := time.Now()
	waitClosed(t, silent, 20*time.Second)
	t.Logf("a silent client was closed after %v", time.Since(start).Round(time.Millisecond))
	f.assertNoPanic(t)

	// Still open at the stop: a keep-alive connection between requests,
	// and a silent one older than the 5 s after which Shutdown closes new
	// connections.
	idle := f.dialAPI(t)
	if _, err := io.WriteString(idle, "GET /v1/status HTTP/1.1\r\nHost: sluice\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status on a keep-alive connection: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	f.dialAPI(t)
	time.Sleep(6 * time.Second)
	f.stopDaemonGracefully(t)
	f.assertNoPanic(t)
	if _, err := os.Stat(f.sock); err == nil {
		t.Errorf("the socket %s outlived the daemon", f.sock)
	}
}

// TestStreamsOutliveTheRequestTimeout: the daemon bounds how long reading a
// request may take (20 s), but not its answer: a session's stream and an
// events stream go on past that, and the session's exit status arrives.
func TestStreamsOutliveTheRequestTimeout(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	marker := filepath.Join(f.dir, "late")
	events := make(chan string, 1)
	go func() {
		out, _, _ := f.sluice(t, 0, 0, "events", "--follow", "--json")
		events <- out
	}()
	start := time.Now()
	script := fmt.Sprintf("sleep 24; touch %s; exit 3", marker)
	_, stderr, code := f.sluice(t, 65534, 65534, "run", "--", "sh", "-c", script)
	if code != 3 {
		t.Fatalf("a 24 s session through the daemon: exit %d after %v, want its command's 3: %s", code, time.Since(start).Round(time.Second), stderr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the command did not run to its end: %v", err)
	}
	f.waitAudit(t, "session_ended", nil)
	f.stopDaemonGracefully(t)
	select {
	case out := <-events:
		if !strings.Contains(out, `"session_ended"`) {
			t.Errorf("the events stream, followed for 24 s, missed the session's end:\n%s", out)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("the events stream did not end with the daemon")
	}
}
