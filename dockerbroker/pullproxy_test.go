// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// hopServer is an httptest server on loopback that records the requests
// it gets (method, path, Authorization) and answers with h.
type hopServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []string
	auth []string
	hdrs []http.Header
}

func newHopServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) *hopServer {
	s := &hopServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Method+" "+r.URL.Path)
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.hdrs = append(s.hdrs, r.Header.Clone())
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *hopServer) hostport() string { return strings.TrimPrefix(s.URL, "http://") }

func (s *hopServer) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// hopWorld is a registry (repo tools, tag 1) that wants a bearer token
// from a realm on another server, which gives it for user:pass only, and
// redirects its blob to a blob server, as Docker Hub does.
type hopWorld struct {
	registry, realm, blobs *hopServer
	// challenge is the registry's WWW-Authenticate ("" for the realm's,
	// "none" for none);
	// blobTarget where it redirects the blob ("" for the blob server).
	challenge, blobTarget string
}

const (
	hopManifest = `{"schemaVersion":2}`
	hopBlob     = "the blob's bytes"
	hopToken    = "tok-123"
)

func newHopWorld(t *testing.T) *hopWorld {
	hw := &hopWorld{}
	hw.realm = newHopServer(t, func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "agent" || p != "s3cret" || r.URL.Path != "/token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"token": hopToken})
	})
	hw.blobs = newHopServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, hopBlob) })
	hw.registry = newHopServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+hopToken {
			c := hw.challenge
			if c == "" {
				c = fmt.Sprintf(`Bearer realm="%s/token",service="reg",scope="repository:tools:pull"`, hw.realm.URL)
			}
			if c != "none" {
				w.Header().Set("WWW-Authenticate", c)
			}
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch {
		case r.URL.Path == "/v2/tools/manifests/1":
			w.Header().Set("Docker-Content-Digest", "sha256:abc")
			w.Header().Set("Set-Cookie", "upstream=1")
			io.WriteString(w, hopManifest)
		case strings.HasPrefix(r.URL.Path, "/v2/tools/blobs/"):
			to := hw.blobTarget
			if to == "" {
				to = hw.blobs.URL + "/cdn/blob"
			}
			http.Redirect(w, r, to, http.StatusTemporaryRedirect)
		default:
			http.NotFound(w, r)
		}
	})
	return hw
}

// hopBroker is a broker whose policy allows the host:ports in allowed,
// and the pull of tools from hw's registry it serves through its proxy,
// with X-Registry-Auth auth: the proxy's URL for the pull and what the
// broker was told it refused.
func hopBroker(t *testing.T, hw *hopWorld, auth string, allowed ...string) (string, *[]string) {
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
	reg := hw.registry.hostport()
	pl := &proxyPull{what: "pull of " + reg + "/tools", upstream: reg, repo: "tools", addr: reg, creds: parseRegistryAuth(auth)}
	token, done := b.proxy.add(pl)
	t.Cleanup(done)
	return "http://" + addr + "/v2/" + token + "/tools", &refused
}

func creds(user, pass string) string {
	raw, _ := json.Marshal(map[string]string{"username": user, "password": pass})
	return base64.URLEncoding.EncodeToString(raw)
}

func get(t *testing.T, u string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

// TestPullProxyHops: with the registry, its realm and its blob host
// allowed, the proxy gets a token from the realm with the client's login
// and follows the blob's redirect; each one missing from the policy is
// refused by name, and that server gets nothing.
func TestPullProxyHops(t *testing.T) {
	t.Run("all allowed", func(t *testing.T) {
		hw := newHopWorld(t)
		base, refused := hopBroker(t, hw, creds("agent", "s3cret"), hw.registry.hostport(), hw.realm.hostport(), hw.blobs.hostport())
		// What the engine sends is not passed upstream: only the headers
		// a pull needs.
		code, hdr, body := get(t, base+"/manifests/1", map[string]string{"Authorization": "Bearer engine-token", "Cookie": "c=1", "X-Evil": "1"})
		if code != 200 || body != hopManifest || hdr.Get("Docker-Content-Digest") != "sha256:abc" {
			t.Fatalf("the manifest: %d %q %v", code, body, hdr)
		}
		if hdr.Get("Set-Cookie") != "" || hdr.Get("WWW-Authenticate") != "" {
			t.Errorf("upstream headers passed to the engine: %v", hdr)
		}
		for i, h := range hw.registry.hdrs {
			if h.Get("Cookie") != "" || h.Get("X-Evil") != "" || h.Get("Authorization") == "Bearer engine-token" {
				t.Errorf("the registry's request %d carried the engine's headers: %v", i, h)
			}
		}
		if got := hw.realm.got(); len(got) != 1 || got[0] != "GET /token" {
			t.Errorf("the realm got %v, want one GET /token", got)
		}
		code, _, body = get(t, base+"/blobs/sha256:def", nil)
		if code != 200 || body != hopBlob {
			t.Fatalf("the blob: %d %q", code, body)
		}
		if got := hw.blobs.got(); len(got) != 1 || got[0] != "GET /cdn/blob" {
			t.Errorf("the blob host got %v", got)
		}
		if len(*refused) != 0 {
			t.Errorf("refused: %v", *refused)
		}
	})
	t.Run("wrong login", func(t *testing.T) {
		hw := newHopWorld(t)
		base, _ := hopBroker(t, hw, creds("agent", "wrong"), hw.registry.hostport(), hw.realm.hostport(), hw.blobs.hostport())
		code, _, body := get(t, base+"/manifests/1", nil)
		if code != http.StatusBadGateway || !strings.Contains(body, "401") {
			t.Errorf("a pull with a wrong login: %d %q, want 502 naming the realm's 401", code, body)
		}
	})
	t.Run("realm denied", func(t *testing.T) {
		hw := newHopWorld(t)
		base, refused := hopBroker(t, hw, creds("agent", "s3cret"), hw.registry.hostport(), hw.blobs.hostport())
		code, _, body := get(t, base+"/manifests/1", nil)
		want := "sends the pull to " + hw.realm.hostport() + " (its auth realm, for a token)"
		if code != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("the realm refused: %d %q, want 403 saying %q", code, body, want)
		}
		if got := hw.realm.got(); len(got) != 0 {
			t.Errorf("the denied realm got %v", got)
		}
		if len(*refused) != 1 || !strings.Contains((*refused)[0], want) {
			t.Errorf("refusals reported: %v", *refused)
		}
		// Once per pull, however often the engine retries.
		get(t, base+"/manifests/1", nil)
		if len(*refused) != 1 {
			t.Errorf("refusals reported after a retry: %v", *refused)
		}
	})
	t.Run("blob host denied", func(t *testing.T) {
		hw := newHopWorld(t)
		base, _ := hopBroker(t, hw, creds("agent", "s3cret"), hw.registry.hostport(), hw.realm.hostport())
		code, _, body := get(t, base+"/blobs/sha256:def", nil)
		want := "sends the pull to " + hw.blobs.hostport() + " (a redirect)"
		if code != http.StatusForbidden || !strings.Contains(body, want) {
			t.Errorf("the blob host refused: %d %q, want 403 saying %q", code, body, want)
		}
		if got := hw.blobs.got(); len(got) != 0 {
			t.Errorf("the denied blob host got %v", got)
		}
	})
	t.Run("registry denied", func(t *testing.T) {
		hw := newHopWorld(t)
		base, _ := hopBroker(t, hw, "", hw.realm.hostport())
		if code, _, _ := get(t, base+"/manifests/1", nil); code != http.StatusForbidden {
			t.Errorf("the registry refused: %d", code)
		}
		if got := hw.registry.got(); len(got) != 0 {
			t.Errorf("the denied registry got %v", got)
		}
	})
}

// TestPullProxyBadInput: malformed and hostile realms, redirects off
// the policy's reach or in a loop, and requests of the proxy for what no
// pull of the session serves are refused; nothing denied is dialed.
func TestPullProxyBadInput(t *testing.T) {
	for _, c := range []struct{ name, challenge, want string }{
		{"realm not a URL", `Bearer realm="http://[::1",service="x"`, "not an https URL"},
		{"realm with no host", `Bearer realm="/token"`, "not an https URL"},
		{"realm of another scheme", `Bearer realm="file:///etc/passwd"`, "not an https URL"},
		{"realm in plain HTTP off loopback", `Bearer realm="http://203.0.113.9/token"`, "not an https URL"},
		{"no realm", `Bearer service="x"`, "not an https URL"},
		{"unknown scheme", `Negotiate abc`, "no challenge the proxy knows"},
		{"no challenge", `none`, "no challenge the proxy knows"},
		{"unterminated quote", `Bearer realm="https://203.0.113.9/token`, "203.0.113.9:443"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hw := newHopWorld(t)
			hw.challenge = c.challenge
			base, _ := hopBroker(t, hw, creds("agent", "s3cret"), hw.registry.hostport(), hw.realm.hostport())
			code, _, body := get(t, base+"/manifests/1", nil)
			if code/100 == 2 || !strings.Contains(body, c.want) {
				t.Errorf("%d %q, want a failure saying %q", code, body, c.want)
			}
			if got := hw.realm.got(); len(got) != 0 {
				t.Errorf("the realm got %v", got)
			}
		})
	}
	t.Run("redirect loop", func(t *testing.T) {
		hw := newHopWorld(t)
		hw.blobTarget = "/v2/tools/blobs/sha256:again"
		base, _ := hopBroker(t, hw, creds("agent", "s3cret"), hw.registry.hostport(), hw.realm.hostport())
		code, _, body := get(t, base+"/blobs/sha256:def", nil)
		if code/100 == 2 || !strings.Contains(body, "more than 10 redirects") {
			t.Errorf("a redirect loop: %d %q", code, body)
		}
		if n := len(hw.registry.got()); n > 13 {
			t.Errorf("the loop was followed %d times", n)
		}
	})
	t.Run("redirect to plain HTTP off loopback", func(t *testing.T) {
		hw := newHopWorld(t)
		hw.blobTarget = "http://203.0.113.9/blob"
		base, _ := hopBroker(t, hw, creds("agent", "s3cret"), hw.registry.hostport(), hw.realm.hostport(), "203.0.113.9:80")
		code, _, body := get(t, base+"/blobs/sha256:def", nil)
		if code != http.StatusForbidden || !strings.Contains(body, "plain HTTP off loopback") {
			t.Errorf("%d %q", code, body)
		}
	})
	t.Run("requests of no pull", func(t *testing.T) {
		hw := newHopWorld(t)
		base, _ := hopBroker(t, hw, creds("agent", "s3cret"), hw.registry.hostport(), hw.realm.hostport(), hw.blobs.hostport())
		u, _ := url.Parse(base)
		root := u.Scheme + "://" + u.Host
		for _, p := range []string{
			"/v2/0123456789abcdef0123456789abcdef/tools/manifests/1", // no such token
			strings.TrimPrefix(base, root) + "/../other/manifests/1",
			strings.TrimPrefix(base, root) + "x/manifests/1",      // another repository
			strings.TrimPrefix(base, root) + "/tags/list",         // not a manifest or blob
			strings.TrimPrefix(base, root) + "/blobs/uploads/abc", // a push's
		} {
			if code, _, body := get(t, root+p, nil); code != http.StatusNotFound {
				t.Errorf("GET %s: %d %q, want 404", p, code, body)
			}
		}
		req, _ := http.NewRequest("DELETE", base+"/manifests/1", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("DELETE: %d", resp.StatusCode)
		}
		if got := hw.registry.got(); len(got) != 0 {
			t.Errorf("the registry got %v", got)
		}
	})
}

// TestParseChallenge reads WWW-Authenticate as a registry writes it,
// and hostile ones without panicking.
func TestParseChallenge(t *testing.T) {
	scheme, p := parseChallenge(`Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull"`)
	if scheme != "Bearer" || p["realm"] != "https://auth.example/token" || p["service"] != "registry.example" || p["scope"] != "repository:a/b:pull" {
		t.Errorf("%q %v", scheme, p)
	}
	if _, p := parseChallenge(`Bearer realm="a\"b",x=y`); p["realm"] != `a"b` || p["x"] != "y" {
		t.Errorf("escapes: %v", p)
	}
	for _, h := range []string{`Bearer`, `Bearer =`, `Bearer realm="`, `Bearer realm="\`, `Bearer ,,,`, `Bearer realm`, strings.Repeat(`a="`, 1000)} {
		parseChallenge(h)
	}
}

// TestParseRegistryAuth: X-Registry-Auth in each base64 the clients
// write; anything else is no credentials.
func TestParseRegistryAuth(t *testing.T) {
	raw := `{"username":"u","password":"p+/?"}`
	for _, enc := range []*base64.Encoding{base64.URLEncoding, base64.RawURLEncoding, base64.StdEncoding} {
		if c := parseRegistryAuth(enc.EncodeToString([]byte(raw))); c.Username != "u" || c.Password != "p+/?" {
			t.Errorf("%v", c)
		}
	}
	for _, h := range []string{"", "!!!", base64.URLEncoding.EncodeToString([]byte("not json"))} {
		if c := parseRegistryAuth(h); c != (registryCreds{}) {
			t.Errorf("%q: %v", h, c)
		}
	}
}

// TestUpstreamRepo: the registry and repository a pull's name means.
func TestUpstreamRepo(t *testing.T) {
	for _, c := range []struct{ name, host, repo string }{
		{"alpine", "registry-1.docker.io", "library/alpine"},
		{"o/i", "registry-1.docker.io", "o/i"},
		{"ghcr.io/o/i", "ghcr.io", "o/i"},
		{"127.0.0.1:5000/tools", "127.0.0.1:5000", "tools"},
		{"localhost/x", "localhost", "x"},
	} {
		if h, r := upstreamRepo(c.name); h != c.host || r != c.repo {
			t.Errorf("%s: %s %s, want %s %s", c.name, h, r, c.host, c.repo)
		}
	}
}
