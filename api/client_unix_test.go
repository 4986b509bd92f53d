// SPDX-License-Identifier: Apache-2.0

//go:build unix

package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/audit"
)

// fakeDaemon serves one connection on a unix socket the way the daemon's
// API does for a create request: it takes the descriptors that come with
// the request's first bytes, then answers with reply.
type fakeDaemon struct {
	path string
	got  chan received
}

type received struct {
	req  *http.Request
	body []byte
	fds  []int
	err  error
}

func newFakeDaemon(t *testing.T, status int, reply string) *fakeDaemon {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	d := &fakeDaemon{path: path, got: make(chan received, 1)}
	go func() {
		c, err := l.AcceptUnix()
		if err != nil {
			d.got <- received{err: err}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		buf, oob := make([]byte, 64<<10), make([]byte, unix.CmsgSpace(16*4))
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil {
			d.got <- received{err: err}
			return
		}
		var fds []int
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if rights, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, rights...)
			}
		}
		req, err := http.ReadRequest(bufio.NewReader(io.MultiReader(bytes.NewReader(buf[:n]), c)))
		if err != nil {
			d.got <- received{err: err, fds: fds}
			return
		}
		body, err := io.ReadAll(req.Body)
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n%s", status, http.StatusText(status), reply)
		d.got <- received{req: req, body: body, fds: fds, err: err}
	}()
	return d
}

func (d *fakeDaemon) wait(t *testing.T) received {
	t.Helper()
	select {
	case r := <-d.got:
		t.Cleanup(func() {
			for _, fd := range r.fds {
				unix.Close(fd)
			}
		})
		if r.err != nil {
			t.Fatalf("fake daemon: %v", r.err)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the client never sent its request")
	}
	return received{}
}

func sameFile(t *testing.T, fd int, f *os.File) bool {
	t.Helper()
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(int(f.Fd()), &b); err != nil {
		t.Fatal(err)
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

func stdioFiles(t *testing.T) [3]*os.File {
	t.Helper()
	var out [3]*os.File
	for i := range out {
		f, err := os.Create(filepath.Join(t.TempDir(), fmt.Sprintf("fd%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		out[i] = f
	}
	return out
}

// TestRunSendsRequestAndStdioAndReadsTheStream checks the create protocol
// of docs/api.md from the client's side: the JSON request, stdin, stdout
// and stderr as SCM_RIGHTS with the first bytes, then the NDJSON stream:
// the session, its events in order, the exit status.
func TestRunSendsRequestAndStdioAndReadsTheStream(t *testing.T) {
	uid := uint32(1000)
	lines := []StreamMessage{
		{Session: &SessionInfo{Name: "run-1-abc", UID: uid, PID: 42, Policy: []string{"example.test"}}},
		{Event: &audit.Event{Type: audit.EgressDenied, Session: "run-1-abc", Dst: "203.0.113.9", Port: 443, Message: "first"}},
		{Event: &audit.Event{Type: audit.DNSRefused, Session: "run-1-abc", Host: "evil.test", Message: "second"}},
		{Exit: ptr(7)},
		{Event: &audit.Event{Type: audit.EgressDenied, Message: "after the exit: never delivered"}},
	}
	var reply strings.Builder
	for _, m := range lines {
		b, _ := json.Marshal(m)
		reply.Write(append(b, '\n'))
	}
	d := newFakeDaemon(t, http.StatusOK, reply.String())
	stdio := stdioFiles(t)
	req := CreateRequest{Argv: []string{"curl", "https://example.test"}, Path: "/usr/bin/curl", Allow: []string{"example.test"}, NoProxyEnv: true}
	var session SessionInfo
	var events []string
	code, err := NewClient(d.path).Run(context.Background(), req, stdio,
		func(s SessionInfo) { session = s },
		func(e audit.Event) { events = append(events, e.Message) })
	if err != nil {
		t.Fatal(err)
	}
	got := d.wait(t)
	if got.req.Method != http.MethodPost || got.req.URL.Path != "/v1/sessions" {
		t.Errorf("request %s %s, want POST /v1/sessions", got.req.Method, got.req.URL.Path)
	}
	var sent CreateRequest
	if err := json.Unmarshal(got.body, &sent); err != nil {
		t.Fatalf("request body %q: %v", got.body, err)
	}
	if sent.Path != req.Path || len(sent.Argv) != 2 || !sent.NoProxyEnv || len(sent.Allow) != 1 {
		t.Errorf("daemon got %+v, want %+v", sent, req)
	}
	if len(got.fds) != 3 {
		t.Fatalf("daemon got %d descriptors with the request, want stdin, stdout, stderr", len(got.fds))
	}
	for i, fd := range got.fds {
		if !sameFile(t, fd, stdio[i]) {
			t.Errorf("descriptor %d is not the client's stdio[%d]", i, i)
		}
	}
	if code != 7 {
		t.Errorf("exit %d, want 7", code)
	}
	if session.Name != "run-1-abc" || session.PID != 42 {
		t.Errorf("started with %+v", session)
	}
	if strings.Join(events, ",") != "first,second" {
		t.Errorf("events %q, want first,second and nothing after the exit line", events)
	}
}

func TestRunReportsTheDaemonsRefusal(t *testing.T) {
	d := newFakeDaemon(t, http.StatusForbidden, `{"error":"a session may only narrow the machine allowlist: evil.test"}`)
	_, err := NewClient(d.path).Run(context.Background(), CreateRequest{Argv: []string{"true"}}, stdioFiles(t), nil, nil)
	d.wait(t)
	if err == nil || !strings.Contains(err.Error(), "only narrow the machine allowlist: evil.test") {
		t.Fatalf("err = %v, want the daemon's message", err)
	}
}

// A stream that ends without an exit line (the daemon stopped) is an
// error, never exit status 0.
func TestRunStreamWithoutExitIsAnError(t *testing.T) {
	b, _ := json.Marshal(StreamMessage{Session: &SessionInfo{Name: "s"}})
	d := newFakeDaemon(t, http.StatusOK, string(b)+"\n")
	code, err := NewClient(d.path).Run(context.Background(), CreateRequest{Argv: []string{"true"}}, stdioFiles(t), nil, nil)
	d.wait(t)
	if err == nil {
		t.Fatalf("exit %d and no error for a stream that ended without an exit status", code)
	}
}

// The lost stream names its session, so that the client can reattach.
func TestRunStreamLostNamesTheSession(t *testing.T) {
	b, _ := json.Marshal(StreamMessage{Session: &SessionInfo{Name: "run-9-lost"}})
	d := newFakeDaemon(t, http.StatusOK, string(b)+"\n")
	_, err := NewClient(d.path).Run(context.Background(), CreateRequest{Argv: []string{"true"}}, stdioFiles(t), nil, nil)
	d.wait(t)
	var lost *StreamLostError
	if !errors.As(err, &lost) || lost.Session != "run-9-lost" || !errors.Is(err, ErrSessionStreamLost) {
		t.Fatalf("err = %v, want a *StreamLostError for run-9-lost", err)
	}
}

// Wait reads a reattached stream to its exit status; a daemon that does
// not know the session, or no daemon at all, are told apart.
func TestWait(t *testing.T) {
	var reply strings.Builder
	for _, m := range []StreamMessage{{Session: &SessionInfo{Name: "run-9-x"}},
		{Event: &audit.Event{Type: audit.EgressDenied, Message: "late"}}, {Exit: ptr(42)}} {
		b, _ := json.Marshal(m)
		reply.Write(append(b, '\n'))
	}
	d := newFakeDaemon(t, http.StatusOK, reply.String())
	var started, events int
	code, err := NewClient(d.path).Wait(context.Background(), "run-9-x",
		func(SessionInfo) { started++ }, func(audit.Event) { events++ })
	r := d.wait(t)
	if err != nil || code != 42 || started != 1 || events != 1 {
		t.Fatalf("Wait = %d, %v (started %d, events %d), want 42", code, err, started, events)
	}
	if r.req.Method != http.MethodGet || r.req.URL.Path != "/v1/sessions/run-9-x/wait" {
		t.Errorf("request %s %s", r.req.Method, r.req.URL.Path)
	}

	d = newFakeDaemon(t, http.StatusNotFound, `{"error":"no session \"run-9-x\""}`)
	if _, err := NewClient(d.path).Wait(context.Background(), "run-9-x", nil, nil); !errors.Is(err, ErrNoSuchSession) {
		t.Errorf("404: err = %v, want ErrNoSuchSession", err)
	}
	d.wait(t)

	if _, err := NewClient(filepath.Join(t.TempDir(), "none.sock")).Wait(context.Background(), "run-9-x", nil, nil); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("no socket: err = %v, want ErrNoDaemon", err)
	}
}

func TestSocketPath(t *testing.T) {
	t.Setenv(SocketEnv, "")
	if got := SocketPath(""); got != DefaultSocket {
		t.Errorf("SocketPath() = %q, want %q", got, DefaultSocket)
	}
	t.Setenv(SocketEnv, "/tmp/env.sock")
	if got := SocketPath(""); got != "/tmp/env.sock" {
		t.Errorf("with %s: %q", SocketEnv, got)
	}
	if got := SocketPath("/tmp/flag.sock"); got != "/tmp/flag.sock" {
		t.Errorf("the flag must win over %s: %q", SocketEnv, got)
	}
}

func ptr[T any](v T) *T { return &v }
