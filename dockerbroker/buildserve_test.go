// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// buildEngine is a fake engine for builds: it knows the images in have
// (name -> ONBUILD triggers), answers pulls of pullable names (adding
// them), and records every build's query and body.
type buildEngine struct {
	mu       sync.Mutex
	have     map[string][]string
	pullable map[string][]string
	pulls    []string
	builds   []*http.Request
	bodies   [][]byte
}

func (f *buildEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := versionPrefix.ReplaceAllString(r.URL.Path, "/")
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == "GET" && strings.HasPrefix(p, "/images/") && strings.HasSuffix(p, "/json"):
		name := strings.TrimSuffix(strings.TrimPrefix(p, "/images/"), "/json")
		on, ok := f.have[name]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"no such image"}`)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Config": map[string]any{"OnBuild": on}})
	case r.Method == "POST" && p == "/images/create":
		// The broker's pulls come by its pull proxy's name, then are
		// named as asked (the tag below): the fake's pull is the tag.
		if !strings.HasPrefix(r.URL.Query().Get("fromImage"), "127.0.0.1:") {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"message":"not a pull through the proxy"}`)
			return
		}
		io.WriteString(w, `{"status":"pulling"}`+"\n")
	case r.Method == "POST" && strings.HasPrefix(p, "/images/") && strings.HasSuffix(p, "/tag"):
		name := r.URL.Query().Get("repo") + ":" + r.URL.Query().Get("tag")
		f.pulls = append(f.pulls, name)
		on, ok := f.pullable[name]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"manifest unknown"}`)
			return
		}
		f.have[name] = on
		w.WriteHeader(http.StatusCreated)
	case r.Method == "DELETE" && strings.HasPrefix(p, "/images/127.0.0.1:"):
		io.WriteString(w, `[{"Untagged":"x"}]`)
	case r.Method == "POST" && p == "/build":
		body, _ := io.ReadAll(r.Body)
		f.builds = append(f.builds, r)
		f.bodies = append(f.bodies, body)
		io.WriteString(w, `{"stream":"Successfully built 0123"}`+"\n")
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"no such thing"}`)
	}
}

// testContext is a build context holding a Dockerfile.
func testContext(t *testing.T, dockerfile string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range [][2]string{{"Dockerfile", dockerfile}, {"app/main.sh", "echo hi\n"}} {
		name, body := f[0], f[1]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	return buf.Bytes()
}

// TestBrokerBuild: a build is forwarded with the context's bytes
// unchanged, the session's cgroup parent, no pull left for the engine,
// and its parent's done called at its end; what the engine would fetch
// is judged first (a missing base of an allowed registry is pulled by
// the broker, then its ONBUILD triggers judged); refusals reach neither
// OnBuild nor the engine.
func TestBrokerBuild(t *testing.T) {
	dir := t.TempDir()
	enginePath, brokerPath := filepath.Join(dir, "engine.sock"), filepath.Join(dir, "broker.sock")
	el, err := net.Listen("unix", enginePath)
	if err != nil {
		t.Fatal(err)
	}
	fe := &buildEngine{
		have: map[string][]string{"base:1": nil, "trig:1": {"ADD http://files.denied.test/x /x"}},
		pullable: map[string][]string{
			"registry.allowed.test/tools:1":    nil,
			"registry.allowed.test/onbuild:1":  {"COPY --from=registry.denied.test/x:1 /a /b"},
			"registry.allowed.test/onbuild2:1": {"COPY --from=registry.allowed.test/trigsrc:1 /a /b"},
			"registry.allowed.test/trigsrc:1":  nil,
		},
	}
	es := &http.Server{Handler: fe}
	go es.Serve(el)
	t.Cleanup(func() { es.Close() })
	var mu sync.Mutex
	var parents, dones []string
	b := New(Config{Scope: Scope{Session: "run-1", Workspace: dir, CgroupParent: "/sluice"}, Engine: enginePath,
		AllowRegistry: func(h string) error {
			if h == "registry.allowed.test" {
				return nil
			}
			return fmt.Errorf("the registry %s is not in the session's allowlist", h)
		},
		AllowFetch: func(h string) error {
			if h == "files.allowed.test:443" {
				return nil
			}
			return fmt.Errorf("%s is not in the session's allowlist", h)
		},
		OnBuild: func(container string) (string, func(), error) {
			mu.Lock()
			defer mu.Unlock()
			p := fmt.Sprintf("/sluice/run-1.alias-%d", len(parents))
			parents = append(parents, p)
			return p, func() { mu.Lock(); dones = append(dones, p); mu.Unlock() }, nil
		},
		SpoolDir: dir})
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
	build := func(query, dockerfile string) (int, string) {
		body := testContext(t, dockerfile)
		req, _ := http.NewRequest("POST", "http://docker/v1.41/build?"+query, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-tar")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// Allowed: a local base, an image of an allowed registry pulled
	// first, an ADD of an allowed host.
	df := "FROM base:1\nCOPY --from=registry.allowed.test/tools:1 /t /t\nADD https://files.allowed.test/a.tar /a\nRUN true\n"
	if st, out := build("t=x%3A1&networkmode=none", df); st != 200 || !strings.Contains(out, "Successfully built") {
		t.Fatalf("an allowed build: %d %s", st, out)
	}
	fe.mu.Lock()
	if len(fe.builds) != 1 {
		t.Fatalf("engine builds: %d", len(fe.builds))
	}
	q := fe.builds[0].URL.Query()
	if q.Get("cgroupparent") != "/sluice/run-1.alias-0" || q.Get("version") != "1" || q.Get("t") != "x:1" || q.Get("networkmode") != "none" {
		t.Errorf("the forwarded query: %v", q)
	}
	// The same context, but for the ADD URL, which is the broker's fetch
	// proxy's (on loopback, the URL's path kept).
	sent, err := ReadBuildContext(bytes.NewReader(fe.bodies[0]), "")
	if err != nil {
		t.Fatal(err)
	}
	proxied := regexp.MustCompile(`^FROM base:1\nCOPY --from=registry.allowed.test/tools:1 /t /t\nADD http://127\.0\.0\.1:[0-9]+/[0-9a-f]{32}/0/a\.tar /a\nRUN true\n$`)
	if !proxied.Match(sent) {
		t.Errorf("the forwarded Dockerfile:\n%s\nwant the client's with the ADD URL the fetch proxy's", sent)
	}
	if strings.Join(fe.pulls, " ") != "registry.allowed.test/tools:1" {
		t.Errorf("the broker's pulls: %v (want the missing image's)", fe.pulls)
	}
	fe.mu.Unlock()
	// --pull: the broker pulls every image again, judged, and the
	// engine is asked to pull nothing.
	if st, out := build("pull=1", "FROM registry.allowed.test/tools:1\nRUN true\n"); st != 200 {
		t.Fatalf("an allowed build with --pull: %d %s", st, out)
	}
	fe.mu.Lock()
	if q := fe.builds[1].URL.Query(); q.Has("pull") || len(fe.pulls) != 2 {
		t.Errorf("with --pull: the forwarded query %v, the broker's pulls %v", q, fe.pulls)
	}
	fe.mu.Unlock()
	// A base image's trigger COPY --from an image of an allowed registry:
	// the broker pulls it (through its proxy) before the engine runs the
	// trigger, which would pull it itself, unjudged hop by hop.
	if st, out := build("", "FROM registry.allowed.test/onbuild2:1\nRUN true\n"); st != 200 {
		t.Fatalf("a build FROM an image whose trigger copies from an allowed registry: %d %s", st, out)
	}
	fe.mu.Lock()
	if !slices.Contains(fe.pulls, "registry.allowed.test/trigsrc:1") {
		t.Errorf("the broker's pulls %v: want the trigger's COPY --from image", fe.pulls)
	}
	fe.mu.Unlock()
	// A build's parent is done once the broker's handler returns, which
	// is after the client has read the answer: wait for it a little.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(dones)
		mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	if len(dones) != 3 || dones[0] != parents[0] {
		t.Errorf("build parents %v, done %v", parents, dones)
	}
	mu.Unlock()

	for _, c := range []struct{ query, dockerfile, want string }{
		{"networkmode=host", "FROM base:1\n", "host"},
		{"remote=http://x.test/c.tar", "FROM base:1\n", "remote"},
		{"version=2", "FROM base:1\n", "BuildKit"},
		{"", "FROM registry.denied.test/base:1\n", "registry.denied.test"},
		{"", "FROM base:1\nADD http://files.denied.test/x /x\n", "files.denied.test"},
		{"", "FROM trig:1\n", "trig:1's ONBUILD ADD http://files.denied.test/x: the engine would fetch a trigger's URL itself"},
		{"", "FROM base:1\nONBUILD ADD https://files.allowed.test/a /a\n", "ONBUILD ADD https://files.allowed.test/a"},
		{"", "FROM base:1\nADD https://files.allowed.test/a\\\n.tar /a\n", "write the URL whole on one line"},
		{"", "FROM registry.allowed.test/onbuild:1\n", "registry.denied.test"},
		{"", "FROM registry.allowed.test/broken:1\n", "manifest unknown"},
		{"", "FROM $BASE\n", "$"},
		{"pull=1", "FROM base:1\n", "registry-1.docker.io"},
		{"platform=linux%2Farm64", "FROM base:1\n", "registry-1.docker.io"},
		{"", "FROM --platform=linux/arm64 base:1\n", "registry-1.docker.io"},
		{"", "FROM --platform=$BUILDPLATFORM base:1\n", "--platform"},
	} {
		st, out := build(c.query, c.dockerfile)
		var m struct{ Message string }
		_ = json.Unmarshal([]byte(out), &m)
		if st != http.StatusForbidden || !strings.HasPrefix(m.Message, "sluice: refused build") || !strings.Contains(m.Message, c.want) {
			t.Errorf("%q %q: %d %q, want a refusal saying %q", c.query, c.dockerfile, st, out, c.want)
		}
	}
	fe.mu.Lock()
	if len(fe.builds) != 3 {
		t.Errorf("the engine got %d builds, want the allowed three only", len(fe.builds))
	}
	fe.mu.Unlock()
	mu.Lock()
	if len(parents) != 3 {
		t.Errorf("refused builds got cgroup parents: %v", parents)
	}
	mu.Unlock()
}

// TestRegistryAuth: a build's X-Registry-Config gives the broker's pull
// of an image the credentials of its registry, and of no other.
func TestRegistryAuth(t *testing.T) {
	cfg := base64.URLEncoding.EncodeToString([]byte(`{"https://index.docker.io/v1/":{"username":"hub"},"ghcr.io":{"username":"gh"}}`))
	for host, want := range map[string]string{"registry-1.docker.io": `{"username":"hub"}`, "ghcr.io": `{"username":"gh"}`, "quay.io": ""} {
		got := registryAuth(cfg, host)
		dec, _ := base64.URLEncoding.DecodeString(got)
		if string(dec) != want {
			t.Errorf("%s: %q, want %q", host, dec, want)
		}
	}
	if registryAuth("not base64!", "ghcr.io") != "" {
		t.Error("a config that is not base64 gave credentials")
	}
}
