// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// pushWorld is a registry (repo tools) that wants a bearer token from a
// realm on another server and answers an upload's start with a Location
// on an upload host, a third server, which takes the blob's parts only
// with the _state it gave and stores them for the registry.
type pushWorld struct {
	registry, realm, uploads *hopServer
	// uploadTarget is the Location the registry answers an upload's
	// start with ("" for the upload host's).
	uploadTarget string

	mu        sync.Mutex
	queries   []string          // the registry's requests' raw queries
	blobs     map[string][]byte // stored by the upload host, by digest
	parts     map[string][]byte // uploads in progress, by id
	manifests map[string][]byte // by tag
	scopes    []string          // the scopes the realm was asked for
}

const pushManifest = `{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json"}`

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func newPushWorld(t *testing.T) *pushWorld {
	pw := &pushWorld{blobs: map[string][]byte{}, parts: map[string][]byte{}, manifests: map[string][]byte{}}
	pw.realm = newHopServer(t, func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "agent" || p != "s3cret" || r.URL.Path != "/token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		pw.mu.Lock()
		pw.scopes = append(pw.scopes, r.URL.Query()["scope"]...)
		pw.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]string{"token": hopToken})
	})
	pw.uploads = newHopServer(t, func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/up/")
		pw.mu.Lock()
		defer pw.mu.Unlock()
		if _, open := pw.parts[id]; !ok || !open || r.URL.Query().Get("_state") != "s-"+id || r.Header.Get("Authorization") != "" {
			http.Error(w, "no such upload, a wrong _state, or the registry's token sent here", http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		pw.parts[id] = append(pw.parts[id], b...)
		switch r.Method {
		case http.MethodPatch:
			w.Header().Set("Location", "/up/"+id+"?_state=s-"+id)
			w.Header().Set("Range", fmt.Sprintf("0-%d", len(pw.parts[id])-1))
			w.Header().Set("Docker-Upload-UUID", id)
			w.WriteHeader(http.StatusAccepted)
		case http.MethodPut:
			d := r.URL.Query().Get("digest")
			if sha(pw.parts[id]) != d {
				http.Error(w, "wrong digest", http.StatusBadRequest)
				return
			}
			pw.blobs[d] = pw.parts[id]
			delete(pw.parts, id)
			// Relative to the upload host: not a path of the proxy's.
			w.Header().Set("Location", "/v2/tools/blobs/"+d)
			w.Header().Set("Docker-Content-Digest", d)
			w.WriteHeader(http.StatusCreated)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	})
	pw.registry = newHopServer(t, func(w http.ResponseWriter, r *http.Request) {
		pw.mu.Lock()
		pw.queries = append(pw.queries, r.URL.RawQuery)
		pw.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+hopToken {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s/token",service="reg",scope="repository:tools:pull"`, pw.realm.URL))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v2/tools/blobs/uploads/":
			id := fmt.Sprintf("u%d", time.Now().UnixNano())
			pw.mu.Lock()
			pw.parts[id] = nil
			pw.mu.Unlock()
			to := pw.uploadTarget
			if to == "" {
				to = pw.uploads.URL + "/up/" + id + "?_state=s-" + id
			}
			w.Header().Set("Location", to)
			w.Header().Set("Docker-Upload-UUID", id)
			w.WriteHeader(http.StatusAccepted)
		case r.Method == http.MethodHead && strings.HasPrefix(r.URL.Path, "/v2/tools/blobs/"):
			pw.mu.Lock()
			_, ok := pw.blobs[strings.TrimPrefix(r.URL.Path, "/v2/tools/blobs/")]
			pw.mu.Unlock()
			if !ok {
				w.WriteHeader(http.StatusNotFound)
			}
		case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v2/tools/manifests/"):
			b, _ := io.ReadAll(r.Body)
			if r.Header.Get("Content-Type") != "application/vnd.docker.distribution.manifest.v2+json" {
				http.Error(w, "no manifest type", http.StatusBadRequest)
				return
			}
			pw.mu.Lock()
			pw.manifests[strings.TrimPrefix(r.URL.Path, "/v2/tools/manifests/")] = b
			pw.mu.Unlock()
			w.Header().Set("Location", "/v2/tools/manifests/"+sha(b))
			w.Header().Set("Docker-Content-Digest", sha(b))
			w.WriteHeader(http.StatusCreated)
		default:
			http.NotFound(w, r)
		}
	})
	return pw
}

// pushProxy is a broker whose policy allows the host:ports in allowed,
// serving the push of tools to pw's registry through its proxy (with the
// client's login): the proxy's base URL for it and what it refused.
func pushProxy(t *testing.T, pw *pushWorld, allowed ...string) (string, *[]string) {
	var mu sync.Mutex
	var refused []string
	b := New(Config{
		AllowFetch: func(hp string) error {
			for _, a := range allowed {
				if a == hp {
					return nil
				}
			}
			return fmt.Errorf("%s is not in the session's allowlist", hp)
		},
		OnRefuse: func(rf *Refusal) { mu.Lock(); refused = append(refused, rf.Error()); mu.Unlock() },
	})
	t.Cleanup(func() { b.Close() })
	addr, err := b.proxy.start()
	if err != nil {
		t.Fatal(err)
	}
	reg := pw.registry.hostport()
	pl := &proxyPull{what: "push of " + reg + "/tools", upstream: reg, repo: "tools", addr: reg,
		creds: parseRegistryAuth(creds("agent", "s3cret")), push: true}
	token, done := b.proxy.add(pl)
	t.Cleanup(done)
	return "http://" + addr + "/v2/" + token + "/tools", &refused
}

// engineDo makes a request of the proxy as the engine would; a body of nil is
// none, and chunked sends it with no length.
func engineDo(t *testing.T, method, u string, body []byte, chunked bool, hdr ...string) (*http.Response, string) {
	t.Helper()
	var rb io.Reader
	if body != nil {
		rb = bytes.NewReader(body)
		if chunked {
			rb = io.MultiReader(rb) // no length known
		}
	}
	req, err := http.NewRequest(method, u, rb)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var proxyUploadRE = regexp.MustCompile(`^/v2/[0-9a-f]{32}/tools/blobs/uploads/_sluice/[0-9a-f]{32}$`)

// TestPushProxyHops: a push with the registry, its realm and its upload
// host allowed goes through: the realm is asked for the push scope with
// the client's login, a cross-repository mount is not passed on, every
// upload Location (absolute on the upload host, then relative to it) is
// given to the engine as a path of the proxy's, the blob's part passes
// byte for byte, streamed, to the upload host with its _state and
// without the registry's token, and the manifest reaches the registry.
// Each hop missing from the policy fails the push naming it, and that
// server records nothing.
func TestPushProxyHops(t *testing.T) {
	blob := bytes.Repeat([]byte("layer bytes "), 100000) // 1.2 MB
	t.Run("all allowed", func(t *testing.T) {
		pw := newPushWorld(t)
		base, refused := pushProxy(t, pw, pw.registry.hostport(), pw.realm.hostport(), pw.uploads.hostport())
		resp, body := engineDo(t, "POST", base+"/blobs/uploads/?mount="+sha(blob)+"&from=0123/other", nil, false,
			"Authorization", "Bearer engine-token")
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusAccepted || !proxyUploadRE.MatchString(loc) {
			t.Fatalf("the upload's start: %d %q, Location %q, want 202 and a path of the proxy's", resp.StatusCode, body, loc)
		}
		pw.mu.Lock()
		q := append([]string(nil), pw.queries...)
		scopes := append([]string(nil), pw.scopes...)
		pw.mu.Unlock()
		for _, s := range q {
			if strings.Contains(s, "mount") || strings.Contains(s, "from") {
				t.Errorf("a mount was passed to the registry: %q", s)
			}
		}
		if len(scopes) != 1 || scopes[0] != "repository:tools:pull,push" {
			t.Errorf("the realm was asked for %v, want repository:tools:pull,push", scopes)
		}
		if resp.Header.Get("Docker-Upload-UUID") == "" {
			t.Errorf("no Docker-Upload-UUID passed: %v", resp.Header)
		}
		u, _ := url.Parse(base)
		root := u.Scheme + "://" + u.Host
		resp, body = engineDo(t, "PATCH", root+loc, blob, true, "Content-Type", "application/octet-stream")
		next := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusAccepted || !proxyUploadRE.MatchString(next) || next == loc {
			t.Fatalf("the PATCH: %d %q, Location %q", resp.StatusCode, body, next)
		}
		if got, want := resp.Header.Get("Range"), fmt.Sprintf("0-%d", len(blob)-1); got != want {
			t.Errorf("the PATCH's Range: %q, want %q", got, want)
		}
		resp, body = engineDo(t, "PUT", root+next+"?digest="+url.QueryEscape(sha(blob)), []byte{}, false)
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("Docker-Content-Digest") != sha(blob) {
			t.Fatalf("the upload's end: %d %q %v", resp.StatusCode, body, resp.Header)
		}
		if l := resp.Header.Get("Location"); l != "" {
			t.Errorf("the upload host's own path passed as a Location: %q", l)
		}
		pw.mu.Lock()
		stored := pw.blobs[sha(blob)]
		pw.mu.Unlock()
		if !bytes.Equal(stored, blob) {
			t.Errorf("the upload host stored %d bytes, want the blob's %d", len(stored), len(blob))
		}
		for i, h := range pw.uploads.hdrs {
			if h.Get("Authorization") != "" {
				t.Errorf("the upload host's request %d carried %q", i, h.Get("Authorization"))
			}
		}
		if got := pw.uploads.hdrs[0].Get("Content-Type"); got != "application/octet-stream" {
			t.Errorf("the PATCH's Content-Type upstream: %q", got)
		}
		if resp, _ := engineDo(t, "HEAD", base+"/blobs/"+sha(blob), nil, false); resp.StatusCode != http.StatusOK {
			t.Errorf("HEAD of the pushed blob: %d", resp.StatusCode)
		}
		resp, body = engineDo(t, "PUT", base+"/manifests/1", []byte(pushManifest), false,
			"Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("Docker-Content-Digest") != sha([]byte(pushManifest)) {
			t.Fatalf("the manifest's PUT: %d %q %v", resp.StatusCode, body, resp.Header)
		}
		if l := resp.Header.Get("Location"); l != strings.TrimPrefix(base, root)+"/manifests/"+sha([]byte(pushManifest)) {
			t.Errorf("the manifest's Location: %q", l)
		}
		pw.mu.Lock()
		m := string(pw.manifests["1"])
		pw.mu.Unlock()
		if m != pushManifest {
			t.Errorf("the registry holds the manifest %q", m)
		}
		for _, h := range []string{pw.uploads.hostport(), pw.registry.hostport()} {
			if strings.Contains(fmt.Sprint(resp.Header), h) {
				t.Errorf("an upstream host reached the engine: %v", resp.Header)
			}
		}
		if len(*refused) != 0 {
			t.Errorf("refused: %v", *refused)
		}
	})
	t.Run("relative upload Location on the registry", func(t *testing.T) {
		pw := newPushWorld(t)
		pw.uploadTarget = "/v2/tools/blobs/uploads/abc?_state=x%2By"
		base, refused := pushProxy(t, pw, pw.registry.hostport(), pw.realm.hostport())
		resp, body := engineDo(t, "POST", base+"/blobs/uploads/", nil, false)
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusAccepted || !proxyUploadRE.MatchString(loc) {
			t.Fatalf("the upload's start: %d %q, Location %q", resp.StatusCode, body, loc)
		}
		u, _ := url.Parse(base)
		engineDo(t, "PATCH", u.Scheme+"://"+u.Host+loc+"?digest=sha256:0&mount=x", []byte("part"), false)
		got := pw.registry.got()
		pw.mu.Lock()
		q := pw.queries[len(pw.queries)-1]
		pw.mu.Unlock()
		last := pw.registry.hdrs[len(pw.registry.hdrs)-1]
		if got[len(got)-1] != "PATCH /v2/tools/blobs/uploads/abc" || q != "_state=x%2By&digest=sha256%3A0" || last.Get("Authorization") != "Bearer "+hopToken {
			t.Errorf("the registry got %v, the last with query %q and %q", got, q, last.Get("Authorization"))
		}
		if len(*refused) != 0 {
			t.Errorf("refused: %v", *refused)
		}
	})
	t.Run("upload host denied", func(t *testing.T) {
		pw := newPushWorld(t)
		base, refused := pushProxy(t, pw, pw.registry.hostport(), pw.realm.hostport())
		resp, body := engineDo(t, "POST", base+"/blobs/uploads/", nil, false)
		want := "sends the push to " + pw.uploads.hostport() + " (its upload Location)"
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, want) || resp.Header.Get("Location") != "" {
			t.Errorf("the upload host refused: %d %q %v, want 403 saying %q", resp.StatusCode, body, resp.Header, want)
		}
		engineDo(t, "POST", base+"/blobs/uploads/", nil, false)
		if len(*refused) != 1 || !strings.Contains((*refused)[0], want) {
			t.Errorf("refusals reported: %v, want one", *refused)
		}
		if got := pw.uploads.got(); len(got) != 0 {
			t.Errorf("the denied upload host got %v", got)
		}
	})
	t.Run("realm denied", func(t *testing.T) {
		pw := newPushWorld(t)
		base, _ := pushProxy(t, pw, pw.registry.hostport(), pw.uploads.hostport())
		resp, body := engineDo(t, "POST", base+"/blobs/uploads/", nil, false)
		want := "sends the push to " + pw.realm.hostport() + " (its auth realm, for a token)"
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("the realm refused: %d %q, want 403 saying %q", resp.StatusCode, body, want)
		}
		if got := pw.realm.got(); len(got) != 0 {
			t.Errorf("the denied realm got %v", got)
		}
	})
	t.Run("upload Location in plain HTTP off loopback", func(t *testing.T) {
		pw := newPushWorld(t)
		pw.uploadTarget = "http://203.0.113.9/up/x"
		base, _ := pushProxy(t, pw, pw.registry.hostport(), pw.realm.hostport(), "203.0.113.9:80")
		resp, body := engineDo(t, "POST", base+"/blobs/uploads/", nil, false)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "plain HTTP off loopback") {
			t.Errorf("%d %q", resp.StatusCode, body)
		}
	})
	t.Run("requests no push makes", func(t *testing.T) {
		pw := newPushWorld(t)
		base, _ := pushProxy(t, pw, pw.registry.hostport(), pw.realm.hostport(), pw.uploads.hostport())
		for _, c := range []struct {
			method, path string
			status       int
		}{
			{"PATCH", "/blobs/uploads/_sluice/0123456789abcdef0123456789abcdef", http.StatusNotFound}, // no such upload
			{"PATCH", "/blobs/uploads/_sluice/../../../other/blobs/uploads/x", http.StatusNotFound},
			{"GET", "/tags/list", http.StatusNotFound},
			{"GET", "/manifests/../../other/manifests/1", http.StatusNotFound},
			{"DELETE", "/manifests/1", http.StatusMethodNotAllowed},
			{"PUT", "/blobs/sha256:abc", http.StatusMethodNotAllowed},
			{"PATCH", "/blobs/uploads/", http.StatusMethodNotAllowed},
		} {
			if resp, body := engineDo(t, c.method, base+c.path, nil, false); resp.StatusCode != c.status {
				t.Errorf("%s %s: %d %q, want %d", c.method, c.path, resp.StatusCode, body, c.status)
			}
		}
		if got := pw.registry.got(); len(got) != 0 {
			t.Errorf("the registry got %v", got)
		}
	})
}

// pushEngine is a fake engine for a push through the broker: it records
// the tag, push and removal it is asked for and, for the push, acts as
// the engine does: it starts an upload at the proxy named in the path
// and says in its progress what the proxy answered.
type pushEngine struct {
	mu    sync.Mutex
	calls []string
	auth  string // the push's X-Registry-Auth
}

func (f *pushEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := versionPrefix.ReplaceAllString(r.URL.EscapedPath(), "/")
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+p+"?"+r.URL.RawQuery)
	f.mu.Unlock()
	switch {
	case r.Method == "POST" && strings.HasSuffix(p, "/tag"):
		if strings.Contains(p, "other") {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"No such image"}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
	case r.Method == "POST" && strings.HasSuffix(p, "/push"):
		f.mu.Lock()
		f.auth = r.Header.Get("X-Registry-Auth")
		f.mu.Unlock()
		name, _ := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(p, "/images/"), "/push"))
		proxy, path, _ := strings.Cut(name, "/")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, `{"status":"The push refers to repository [%s]"}`+"\n", name)
		resp, err := http.Post("http://"+proxy+"/v2/"+path+"/blobs/uploads/", "", nil)
		if err != nil {
			fmt.Fprintf(w, `{"error":%q}`+"\n", err.Error())
			return
		}
		defer resp.Body.Close()
		var e struct {
			Errors []struct{ Code, Message string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != http.StatusAccepted && len(e.Errors) > 0 {
			msg := strings.ToLower(e.Errors[0].Code) + ": " + e.Errors[0].Message
			b, _ := json.Marshal(map[string]any{"errorDetail": map[string]string{"message": msg}, "error": msg})
			fmt.Fprintf(w, "%s\n", b)
			return
		}
		fmt.Fprintf(w, `{"status":"1: digest: sha256:abc size: 1 (%s)"}`+"\n", name)
	case r.Method == "DELETE" && strings.HasPrefix(p, "/images/"):
		_ = json.NewEncoder(w).Encode([]map[string]string{{"Untagged": "x"}})
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"no such thing"}`)
	}
}

// TestPushThroughBroker: `docker push` of a session is made through the
// proxy: the image is tagged with the proxy's name, the engine pushes
// that (with no credentials of the client's) and its progress reaches
// the client with the client's name, the proxy's name is removed, also
// when the push fails; a refused upload host fails the push naming it.
// A push of every tag and one by digest are refused.
func TestPushThroughBroker(t *testing.T) {
	run := func(t *testing.T, pw *pushWorld, path string, allowed ...string) (int, string, *pushEngine, []string) {
		dir := t.TempDir()
		enginePath := filepath.Join(dir, "engine.sock")
		el, err := net.Listen("unix", enginePath)
		if err != nil {
			t.Fatal(err)
		}
		fe := &pushEngine{}
		es := &http.Server{Handler: fe}
		go es.Serve(el)
		t.Cleanup(func() { es.Close() })
		var mu sync.Mutex
		var refused []string
		reg := pw.registry.hostport()
		b := New(Config{Engine: enginePath,
			AllowRegistry: func(string) error { return nil },
			AllowFetch: func(hp string) error {
				for _, a := range allowed {
					if a == hp {
						return nil
					}
				}
				return fmt.Errorf("%s is not in the session's allowlist", hp)
			},
			OnRefuse: func(rf *Refusal) { mu.Lock(); refused = append(refused, rf.Error()); mu.Unlock() },
		})
		t.Cleanup(func() { b.Close() })
		bl, err := net.Listen("unix", filepath.Join(dir, "broker.sock"))
		if err != nil {
			t.Fatal(err)
		}
		go b.Serve(bl)
		c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", filepath.Join(dir, "broker.sock"))
		}}, Timeout: 20 * time.Second}
		path = strings.ReplaceAll(path, "REG", reg)
		req, _ := http.NewRequest("POST", "http://docker"+path, nil)
		req.Header.Set("X-Registry-Auth", creds("agent", "s3cret"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		mu.Lock()
		defer mu.Unlock()
		return resp.StatusCode, string(body), fe, append([]string(nil), refused...)
	}
	tokenRE := regexp.MustCompile(`[0-9a-f]{32}`)
	check := func(t *testing.T, fe *pushEngine, reg string) {
		t.Helper()
		fe.mu.Lock()
		defer fe.mu.Unlock()
		if len(fe.calls) != 3 || !strings.HasPrefix(fe.calls[0], "POST /images/"+url.PathEscape(reg+"/tools:1")+"/tag?") ||
			!strings.Contains(fe.calls[1], "/push?tag=1") || !strings.HasPrefix(fe.calls[2], "DELETE /images/") || !strings.HasSuffix(fe.calls[2], "?noprune=1") {
			t.Errorf("the engine was asked %q, want a tag, a push and a removal of the proxy's name", fe.calls)
		}
		if len(fe.calls) == 3 {
			tagged, _ := url.ParseQuery(fe.calls[0][strings.Index(fe.calls[0], "?")+1:])
			removed, _ := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(fe.calls[2], "DELETE /images/"), "?noprune=1"))
			if !tokenRE.MatchString(tagged.Get("repo")) || !strings.HasSuffix(tagged.Get("repo"), "/tools") || tagged.Get("tag") != "1" ||
				removed != tagged.Get("repo")+":1" {
				t.Errorf("tagged %v, removed %q", tagged, removed)
			}
		}
		if fe.auth != noAuth {
			t.Errorf("the engine's X-Registry-Auth: %q, want no credentials", fe.auth)
		}
	}
	t.Run("all allowed", func(t *testing.T) {
		pw := newPushWorld(t)
		reg := pw.registry.hostport()
		code, body, fe, refused := run(t, pw, "/v1.41/images/REG/tools/push?tag=1", reg, pw.realm.hostport(), pw.uploads.hostport())
		if code != 200 || !strings.Contains(body, "The push refers to repository ["+reg+"/tools]") || !strings.Contains(body, "digest: sha256:abc") {
			t.Errorf("the push: %d %q", code, body)
		}
		if tokenRE.MatchString(body) {
			t.Errorf("the proxy's name reached the client: %q", body)
		}
		check(t, fe, reg)
		if len(refused) != 0 {
			t.Errorf("refused: %v", refused)
		}
	})
	t.Run("upload host denied", func(t *testing.T) {
		pw := newPushWorld(t)
		reg := pw.registry.hostport()
		code, body, fe, refused := run(t, pw, "/v1.41/images/REG/tools/push?tag=1", reg, pw.realm.hostport())
		want := "sends the push to " + pw.uploads.hostport() + " (its upload Location)"
		if code != 200 || !strings.Contains(body, `"error"`) || !strings.Contains(body, want) {
			t.Errorf("the push with the upload host refused: %d %q, want an error saying %q", code, body, want)
		}
		if tokenRE.MatchString(body) {
			t.Errorf("the proxy's token reached the client: %q", body)
		}
		check(t, fe, reg)
		if len(refused) != 1 || !strings.Contains(refused[0], want) {
			t.Errorf("refusals: %v", refused)
		}
		if got := pw.uploads.got(); len(got) != 0 {
			t.Errorf("the denied upload host got %v", got)
		}
	})
	t.Run("no such image", func(t *testing.T) {
		pw := newPushWorld(t)
		code, body, fe, _ := run(t, pw, "/v1.41/images/REG/other/push?tag=1", pw.registry.hostport())
		if code != http.StatusNotFound || !strings.Contains(body, "No such image") {
			t.Errorf("a push of no image: %d %q", code, body)
		}
		fe.mu.Lock()
		defer fe.mu.Unlock()
		if len(fe.calls) != 1 {
			t.Errorf("the engine was asked %q, want only the tag", fe.calls)
		}
	})
	for _, c := range []struct{ name, path, want string }{
		{"every tag", "/v1.41/images/REG/tools/push", "a push of every tag (--all-tags)"},
		{"by digest", "/v1.41/images/REG/tools@sha256:abc/push", "a push by digest"},
		{"not a tag", "/v1.41/images/REG/tools/push?tag=a/b", "is not a tag"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pw := newPushWorld(t)
			code, body, fe, refused := run(t, pw, c.path, pw.registry.hostport())
			if code/100 != 4 || !strings.Contains(body, c.want) || len(refused) != 1 {
				t.Errorf("%d %q (refused %v), want a refusal saying %q", code, body, refused, c.want)
			}
			fe.mu.Lock()
			defer fe.mu.Unlock()
			if len(fe.calls) != 0 {
				t.Errorf("the engine was asked %q", fe.calls)
			}
		})
	}
}
