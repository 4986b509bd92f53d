// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const fakeID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// fakeEngine speaks the few engine endpoints the broker's forwarding
// needs: create, inspect, a followed log that never ends, and an exec
// start that upgrades the connection and echoes.
type fakeEngine struct {
	mu      sync.Mutex
	created []map[string]any
	started []string
	labels  map[string]string
	removed int
	netvol  *fakeNetVol
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := versionPrefix.ReplaceAllString(r.URL.Path, "/")
	if f.netvol != nil && f.netvol.serve(w, r, p) {
		return
	}
	switch {
	case p == "/containers/create":
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		f.mu.Lock()
		f.created = append(f.created, m)
		if l, ok := m["Labels"].(map[string]any); ok {
			f.labels = map[string]string{}
			for k, v := range l {
				f.labels[k] = fmt.Sprint(v)
			}
		}
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"Id":%q}`, fakeID)
	case p == "/containers/"+fakeID+"/json" || p == "/containers/agent/json":
		f.mu.Lock()
		labels := f.labels
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"Id": fakeID, "Config": map[string]any{"Labels": labels}})
	case p == "/containers/"+fakeID+"/start" && (len(r.TransferEncoding) > 0 || r.ContentLength != 0):
		// As the engine since API 1.24: a start takes no body, chunked
		// and empty included.
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"message":"starting container with non-empty request body was deprecated"}`)
	case p == "/containers/"+fakeID+"/start":
		f.mu.Lock()
		f.started = append(f.started, fakeID)
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case p == "/containers/"+fakeID+"/logs":
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := io.WriteString(w, "line\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond)
		}
	case p == "/containers/"+fakeID+"/exec":
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"Id":"e1"}`)
	case p == "/exec/e1/start":
		_, _ = io.ReadAll(r.Body) // the start's own body, before the stream
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
		brw.Flush()
		_, _ = io.Copy(c, brw)
	case r.Method == "DELETE" && p == "/containers/"+fakeID:
		f.mu.Lock()
		f.removed++
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case p == "/containers/other/json":
		_ = json.NewEncoder(w).Encode(map[string]any{"Id": strings.Repeat("f", 64), "Config": map[string]any{"Labels": map[string]string{}}})
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"no such thing"}`)
	}
}

// start serves a fake engine and a broker in front of it; it returns a
// client of the broker, the broker and the engine.
func start(t *testing.T) (*http.Client, string, *Broker, *fakeEngine) {
	t.Helper()
	dir := t.TempDir()
	enginePath, brokerPath := filepath.Join(dir, "engine.sock"), filepath.Join(dir, "broker.sock")
	el, err := net.Listen("unix", enginePath)
	if err != nil {
		t.Fatal(err)
	}
	fe := &fakeEngine{}
	es := &http.Server{Handler: fe}
	go es.Serve(el)
	t.Cleanup(func() { es.Close() })
	var onStart []string
	b := New(Config{Scope: Scope{Session: "run-1", Workspace: dir, CgroupParent: "/sluice"}, Engine: enginePath,
		AllowRegistry: func(h string) error {
			if h != "registry.allowed.test" {
				return fmt.Errorf("the registry %s is not in the session's allowlist", h)
			}
			return nil
		},
		OnStart: func(id string) error { onStart = append(onStart, id); return nil }})
	bl, err := net.Listen("unix", brokerPath)
	if err != nil {
		t.Fatal(err)
	}
	go b.Serve(bl)
	t.Cleanup(func() { b.Close() })
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", brokerPath)
	}}, Timeout: 10 * time.Second}
	return c, brokerPath, b, fe
}

func TestBrokerCreateStartAndRefusals(t *testing.T) {
	c, _, b, fe := start(t)
	resp, err := c.Post("http://docker/v1.47/containers/create?name=agent", "application/json", strings.NewReader(`{"Image":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || len(b.Containers()) != 1 {
		t.Fatalf("create: %s, containers %v", resp.Status, b.Containers())
	}
	fe.mu.Lock()
	hc, _ := fe.created[0]["HostConfig"].(map[string]any)
	labels, _ := fe.created[0]["Labels"].(map[string]any)
	fe.mu.Unlock()
	if hc["CgroupParent"] != "/sluice" || labels[SessionLabel] != "run-1" {
		t.Errorf("the engine got %v", fe.created[0])
	}
	// By name: resolved through the engine, forwarded by full id.
	resp, err = c.Post("http://docker/v1.47/containers/agent/start", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || len(fe.started) != 1 {
		t.Errorf("start by name: %s, engine started %v", resp.Status, fe.started)
	}
	for _, req := range []struct{ method, path, body, want string }{
		{"POST", "/v1.47/containers/create", `{"HostConfig":{"Privileged":true}}`, "--privileged"},
		{"POST", "/v1.47/containers/other/start", "", "other is not a container of this session"},
		{"POST", "/v1.47/images/create?fromImage=registry.denied.test/x&tag=1", "", "the registry registry.denied.test is not in the session's allowlist"},
		{"POST", "/v1.47/swarm/init", "{}", "not an endpoint sluice judges"},
		{"POST", "/v1.47/build", "", "builds are not judged in this session"},
	} {
		r, _ := http.NewRequest(req.method, "http://docker"+req.path, strings.NewReader(req.body))
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ Message string }
		_ = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if resp.StatusCode/100 != 4 || !strings.HasPrefix(m.Message, "sluice: refused ") || !strings.Contains(m.Message, req.want) {
			t.Errorf("%s %s: %s %q, want a refusal saying %q", req.method, req.path, resp.Status, m.Message, req.want)
		}
	}
}

// TestBrokerCloseCutsStreams: a followed log and an upgraded exec are
// cut by Close, both ways, within a bounded time.
func TestBrokerCloseCutsStreams(t *testing.T) {
	c, brokerPath, b, _ := start(t)
	resp, err := c.Post("http://docker/containers/create", "application/json", strings.NewReader(`{"Image":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// A followed log.
	lc := &http.Client{Transport: c.Transport}
	logs, err := lc.Get("http://docker/containers/" + fakeID + "/logs?follow=1")
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(logs.Body).ReadString('\n')
	if err != nil || line != "line\n" {
		t.Fatalf("logs: %q %v", line, err)
	}
	// An exec: create, then start upgraded, and echo through it.
	resp, err = c.Post("http://docker/containers/"+fakeID+"/exec", "application/json", strings.NewReader(`{"Cmd":["sh"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	conn, err := net.Dial("unix", brokerPath)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"Detach":false}`
	fmt.Fprintf(conn, "POST /exec/e1/start HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	up, err := http.ReadResponse(br, nil)
	if err != nil || up.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("exec start: %v %v", up, err)
	}
	io.WriteString(conn, "ping\n")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := br.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("through the upgraded exec: %q %v", got, err)
	}
	// Close: both end at once.
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5 s")
	}
	logsDone := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, logs.Body); logsDone <- err }()
	select {
	case <-logsDone:
	case <-time.After(5 * time.Second):
		t.Error("the followed log was not cut by Close")
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadString('\n'); err == nil {
		t.Error("the upgraded exec still carries bytes after Close")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("the upgraded exec was not cut by Close")
	}
}

// TestBrokerStartNotAttachedRemoves: a container the session service
// could not attach does not run: the broker removes it and says why.
func TestBrokerStartNotAttachedRemoves(t *testing.T) {
	c, _, b, fe := start(t)
	b.cfg.OnStart = func(string) error { return fmt.Errorf("its cgroup is not under sluice's root") }
	resp, err := c.Post("http://docker/containers/create", "application/json", strings.NewReader(`{"Image":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Post("http://docker/containers/"+fakeID+"/start", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fe.mu.Lock()
	removed := fe.removed
	fe.mu.Unlock()
	if resp.StatusCode/100 == 2 || !strings.Contains(string(msg), "the container was removed") || removed != 1 {
		t.Errorf("start with a failed attach: %s %s, engine removals %d", resp.Status, msg, removed)
	}
}
