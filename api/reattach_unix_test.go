// SPDX-License-Identifier: Apache-2.0

//go:build unix

package api

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/audit"
)

// waitDaemon is one daemon's life on the API socket at path, serving a
// session's wait stream with handler; stop ends it (the socket goes with
// it, as when a daemon exits).
func waitDaemon(t *testing.T, path string, handler http.HandlerFunc) (stop func()) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Errorf("listen on %s: %v", path, err) // may run on another goroutine: no Fatal
		return func() {}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sessions/{name}/wait", handler)
	srv := &http.Server{Handler: mux}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.Close()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

// stream writes messages as NDJSON lines, flushing each.
func stream(w http.ResponseWriter, msgs ...StreamMessage) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		w.Write(append(b, '\n'))
	}
	w.(http.Flusher).Flush()
}

func exitMsg(code int) StreamMessage { return StreamMessage{Exit: &code} }

// TestReattachFollowsRestarts: the daemon is gone (nothing on the socket),
// one comes back, streams the session and dies again without its exit
// status, and a third one streams it to its exit. Reattach returns that
// exit status, with the events of both streams, says once that a daemon
// came back, and does not bound a command that runs longer than the
// reconnect bound once a daemon has it.
func TestReattachFollowsRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.sock")
	const name = "s-1"
	info := &SessionInfo{Name: name}
	bound := 400 * time.Millisecond

	var asked []string
	var mu sync.Mutex
	note := func(r *http.Request) {
		mu.Lock()
		asked = append(asked, r.PathValue("name"))
		mu.Unlock()
	}
	firstDied := make(chan struct{})
	go func() {
		time.Sleep(250 * time.Millisecond) // no daemon for a while
		var stopFirst func()
		var once sync.Once
		stopFirst = waitDaemon(t, path, func(w http.ResponseWriter, r *http.Request) {
			note(r)
			stream(w, StreamMessage{Session: info}, StreamMessage{Event: &audit.Event{Type: "deny", Dst: "203.0.113.1"}})
			// This daemon dies mid-stream.
			once.Do(func() {
				go func() {
					stopFirst()
					close(firstDied)
				}()
			})
			panic(http.ErrAbortHandler)
		})
	}()
	go func() {
		<-firstDied
		time.Sleep(150 * time.Millisecond)
		waitDaemon(t, path, func(w http.ResponseWriter, r *http.Request) {
			note(r)
			stream(w, StreamMessage{Session: info}, StreamMessage{Event: &audit.Event{Type: "deny", Dst: "203.0.113.2"}})
			time.Sleep(2 * bound) // the command runs on, longer than the bound
			stream(w, exitMsg(7))
		})
	}()

	var restarted int
	var dsts []string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, err := NewClient(path).Reattach(ctx, name, bound, func(s SessionInfo) {
		if s.Name != name {
			t.Errorf("restarted with session %q", s.Name)
		}
		restarted++
	}, func(e audit.Event) { dsts = append(dsts, e.Dst) })
	if err != nil || code != 7 {
		t.Fatalf("Reattach: %d, %v; want 7, nil", code, err)
	}
	if restarted != 1 {
		t.Fatalf("restarted called %d times, want once", restarted)
	}
	if len(dsts) != 2 || dsts[0] != "203.0.113.1" || dsts[1] != "203.0.113.2" {
		t.Fatalf("events %v, want both streams' events in order", dsts)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0] != name || asked[1] != name {
		t.Fatalf("waits asked for %v, want %s of each daemon", asked, name)
	}
}

// TestReattachUnknownSession: a daemon that does not know the session
// ends the wait at once with ErrNoSuchSession.
func TestReattachUnknownSession(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.sock")
	waitDaemon(t, path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(ErrorResponse{Error: "no session " + r.PathValue("name")})
	})
	start := time.Now()
	_, err := NewClient(path).Reattach(context.Background(), "gone", 5*time.Second, nil, nil)
	if !errors.Is(err, ErrNoSuchSession) {
		t.Fatalf("Reattach: %v, want ErrNoSuchSession", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v: an unknown session must not wait out the bound", d)
	}
}

// TestReattachGivesUp: with no daemon on the socket, Reattach gives up
// with ErrDaemonGone once the bound has passed (not before), and at once
// when its context ends.
func TestReattachGivesUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.sock")
	bound := 300 * time.Millisecond
	start := time.Now()
	_, err := NewClient(path).Reattach(context.Background(), "s-1", bound, nil, nil)
	d := time.Since(start)
	if !errors.Is(err, ErrDaemonGone) {
		t.Fatalf("Reattach: %v, want ErrDaemonGone", err)
	}
	if d < bound || d > bound+2*time.Second {
		t.Fatalf("gave up after %v, want about %v", d, bound)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	_, err = NewClient(path).Reattach(ctx, "s-1", time.Hour, nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Reattach after cancel: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancel took %v", d)
	}
}
