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
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/audit"
)

// Client talks to the daemon's API socket.
type Client struct {
	socket string
	hc     *http.Client
}

// SocketPath is where clients find the daemon: the flag value if set,
// else $SLUICE_SOCKET, else the default.
func SocketPath(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv(SocketEnv); env != "" {
		return env
	}
	return DefaultSocket
}

// NewClient returns a client for the socket at path.
func NewClient(path string) *Client {
	return &Client{socket: path, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}}
}

// Available reports whether a daemon answers on the socket.
func (c *Client) Available(ctx context.Context) bool { return c.Reach(ctx) == nil }

// Reach says why no daemon answers on the socket, or nil when one does.
// A socket the caller may not open (it is not in the daemon's group) is
// an error wrapping os.ErrPermission that says so.
func (c *Client) Reach(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := c.Status(ctx)
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%s: permission denied: only root and members of the daemon's group may use it: %w", c.socket, os.ErrPermission)
	}
	return err
}

// apiError turns a non-2xx response into an error carrying its message.
func apiError(resp *http.Response) error {
	var e ErrorResponse
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return &StatusError{Code: resp.StatusCode, Msg: e.Error}
	}
	return &StatusError{Code: resp.StatusCode, Msg: resp.Status}
}

// StatusError is the daemon's answer to a request it refused.
type StatusError struct {
	Code int    // the HTTP status
	Msg  string // the daemon's error
}

func (e *StatusError) Error() string { return "daemon: " + e.Msg }

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://sluice"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("daemon at %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return apiError(resp)
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		b, err := io.ReadAll(resp.Body)
		*raw = b
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Status asks for the daemon's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	return s, c.do(ctx, http.MethodGet, "/v1/status", nil, &s)
}

// Sessions lists the sessions the caller may see.
func (c *Client) Sessions(ctx context.Context) ([]SessionInfo, error) {
	var out []SessionInfo
	return out, c.do(ctx, http.MethodGet, "/v1/sessions", nil, &out)
}

// Session shows one session.
func (c *Client) Session(ctx context.Context, name string) (SessionInfo, error) {
	var out SessionInfo
	return out, c.do(ctx, http.MethodGet, "/v1/sessions/"+name, nil, &out)
}

// Kill kills a session.
func (c *Client) Kill(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/sessions/"+name, nil, nil)
}

// Signal forwards a signal to a session's command.
func (c *Client) Signal(ctx context.Context, name, sig string) error {
	return c.do(ctx, http.MethodPost, "/v1/sessions/"+name+"/signal", SignalRequest{Signal: sig}, nil)
}

// Allowlist returns the machine allowlist file contents.
func (c *Client) Allowlist(ctx context.Context) (json.RawMessage, error) {
	var raw json.RawMessage
	return raw, c.do(ctx, http.MethodGet, "/v1/allowlist", nil, &raw)
}

// Allow adds entries to the machine allowlist.
func (c *Client) Allow(ctx context.Context, req AllowRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/allowlist", req, nil)
}

// Deny removes entries from the machine allowlist.
func (c *Client) Deny(ctx context.Context, req AllowRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/allowlist/remove", req, nil)
}

// Revoke removes an owner's entries.
func (c *Client) Revoke(ctx context.Context, owner string) (RevokeResponse, error) {
	var out RevokeResponse
	return out, c.do(ctx, http.MethodPost, "/v1/allowlist/revoke", RevokeRequest{Owner: owner}, &out)
}

// Events streams events until ctx ends.
func (c *Client) Events(ctx context.Context, fn func(audit.Event)) error {
	return follow(ctx, c, "/v1/events", fn)
}

// follow reads the NDJSON stream at path, one T a line, into fn until
// ctx ends (nil) or the stream does (its error); lines that are not a T
// are skipped.
func follow[T any](ctx context.Context, c *Client, path string, fn func(T)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sluice"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("daemon at %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return apiError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var v T
		if json.Unmarshal(sc.Bytes(), &v) == nil {
			fn(v)
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}

// Run creates a session running req.Argv with stdio as its stdin, stdout
// and stderr, calls started once the session exists, fn for every event,
// and returns the command's exit status.
func (c *Client) Run(ctx context.Context, req CreateRequest, stdio [3]*os.File, started func(SessionInfo), fn func(audit.Event)) (int, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	fds := make([]int, 3)
	for i, f := range stdio {
		fds[i] = int(f.Fd())
	}
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, "unix", c.socket)
			if err != nil {
				return nil, err
			}
			return &fdConn{UnixConn: nc.(*net.UnixConn), fds: fds}, nil
		},
	}
	defer tr.CloseIdleConnections()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sluice/v1/sessions", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: tr}).Do(hreq)
	runtime.KeepAlive(stdio) // the descriptors must stay open until sent
	if err != nil {
		return 0, fmt.Errorf("daemon at %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, apiError(resp)
	}
	return readStream(resp.Body, started, fn)
}

// ErrSessionStreamLost is wrapped by the error of Run and Wait when the
// daemon went away after the session had started (a crash, a restart):
// the session goes on, confined, and Wait on the next daemon returns its
// exit status. errors.As with *StreamLostError gives the session's name.
var ErrSessionStreamLost = errors.New("the daemon went away before the session ended (daemon restarted?)")

// ErrNoDaemon is wrapped by Wait's error when nothing answers on the
// socket.
var ErrNoDaemon = errors.New("no daemon answers")

// ErrNoSuchSession is wrapped by Wait's error when the daemon does not
// know the session (it ended long ago, or belongs to someone else).
var ErrNoSuchSession = errors.New("no such session")

// StreamLostError says which session's stream ended without its exit
// status.
type StreamLostError struct {
	Session string
	Err     error // what ended the stream, if anything did
}

func (e *StreamLostError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("session %s: %v: %v", e.Session, ErrSessionStreamLost, e.Err)
	}
	return fmt.Sprintf("session %s: %v", e.Session, ErrSessionStreamLost)
}

// Unwrap makes errors.Is(err, ErrSessionStreamLost) hold.
func (e *StreamLostError) Unwrap() error { return ErrSessionStreamLost }

// Wait reattaches to a running (or lately ended) session after its create
// stream was lost: started gets the session once the daemon has it, fn
// its events from now on; the result is the command's exit status.
func (c *Client) Wait(ctx context.Context, name string, started func(SessionInfo), fn func(audit.Event)) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sluice/v1/sessions/"+name+"/wait", nil)
	if err != nil {
		return 0, err
	}
	// A fresh connection each time: the last one died with its daemon.
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", c.socket)
	}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, fmt.Errorf("daemon at %s: %w: %w", c.socket, ErrNoDaemon, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return 0, fmt.Errorf("%w: %w", ErrNoSuchSession, apiError(resp))
	case resp.StatusCode != http.StatusOK:
		return 0, apiError(resp)
	}
	code, err := readStream(resp.Body, started, fn)
	var lost *StreamLostError
	if errors.As(err, &lost) && lost.Session == "" {
		lost.Session = name
	}
	return code, err
}

// readStream reads a session stream (a create response, or a wait) up to
// its exit status.
func readStream(body io.Reader, started func(SessionInfo), fn func(audit.Event)) (int, error) {
	var session string
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m StreamMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		switch {
		case m.Session != nil:
			session = m.Session.Name
			if started != nil {
				started(*m.Session)
			}
		case m.Event != nil && fn != nil:
			fn(*m.Event)
		case m.Exit != nil:
			return *m.Exit, nil
		case m.Error != "":
			return 0, errors.New(m.Error)
		}
	}
	err := sc.Err()
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil
	}
	if session != "" {
		return 0, &StreamLostError{Session: session, Err: err}
	}
	if err != nil {
		return 0, fmt.Errorf("daemon stream: %w", err)
	}
	return 0, errors.New("daemon: the session stream ended without an exit status (daemon restarted?)")
}

// fdConn is the client side: its first Write carries descriptors.
type fdConn struct {
	*net.UnixConn
	mu  sync.Mutex
	fds []int
}

func (c *fdConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	fds := c.fds
	c.fds = nil
	c.mu.Unlock()
	if len(fds) == 0 {
		return c.UnixConn.Write(b)
	}
	n, _, err := c.WriteMsgUnix(b, unix.UnixRights(fds...), nil)
	return n, err
}
