// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestDigestKey: one key for the ways a name can be written, none for a
// reference without a digest.
func TestDigestKey(t *testing.T) {
	want := "registry-1.docker.io/library/alpine@" + testDigest
	for _, ref := range []string{"alpine@", "docker.io/library/alpine@", "library/alpine@", "alpine:3@", "index.docker.io/alpine@"} {
		if k, ok := digestKey(ref + testDigest); !ok || k != want {
			t.Errorf("%s: %q %v, want %q", ref, k, ok, want)
		}
	}
	if k, _ := digestKey("127.0.0.1:5000/tools@" + testDigest); k != "127.0.0.1:5000/tools@"+testDigest {
		t.Errorf("a registry with a port: %q", k)
	}
	for _, ref := range []string{"alpine", "alpine:3", "alpine@", "alpine@sha256:xyz", "@" + testDigest, "alpine@" + testDigest + "/x"} {
		if k, ok := digestKey(ref); ok {
			t.Errorf("%s: %q, want no key", ref, k)
		}
	}
}

// TestRewriteDockerfile names the images of subst by their ids in FROM
// and COPY --from and nowhere else.
func TestRewriteDockerfile(t *testing.T) {
	ref := "reg.example/a@" + testDigest
	in := "# FROM " + ref + "\nFROM " + ref + " AS base\n  from\t" + ref + "\nFROM --platform=linux/amd64 " + ref + "\r\n" +
		"COPY --from=" + ref + " /a /b\nRUN echo " + ref + "\nLABEL x=" + ref + "\nFROM " + ref + "x\nFROM " + ref
	want := "# FROM " + ref + "\nFROM sha256:id AS base\n  from\tsha256:id\nFROM --platform=linux/amd64 sha256:id\r\n" +
		"COPY --from=sha256:id /a /b\nRUN echo " + ref + "\nLABEL x=" + ref + "\nFROM " + ref + "x\nFROM sha256:id"
	if got := string(rewriteDockerfile([]byte(in), map[string]string{ref: "sha256:id"})); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestRewriteContext replaces the Dockerfile's content, plain or gzip,
// and copies every other entry as it was.
func TestRewriteContext(t *testing.T) {
	for _, gz := range []bool{false, true} {
		var raw bytes.Buffer
		var w io.Writer = &raw
		var zw *gzip.Writer
		if gz {
			zw = gzip.NewWriter(&raw)
			w = zw
		}
		tw := tar.NewWriter(w)
		for _, e := range []struct{ name, body string }{{"a.txt", "aaa"}, {"./dockerfile", "FROM old\n"}, {"dir/b", "bbb"}} {
			if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			io.WriteString(tw, e.body)
		}
		tw.Close()
		if zw != nil {
			zw.Close()
		}
		var out bytes.Buffer
		if err := rewriteContext(bytes.NewReader(raw.Bytes()), &out, "Dockerfile", []byte("FROM sha256:new\n")); err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(&out)
		var got []string
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(tr)
			got = append(got, h.Name+"="+string(b))
		}
		if want := "a.txt=aaa|./dockerfile=FROM sha256:new\n|dir/b=bbb"; strings.Join(got, "|") != want {
			t.Errorf("gzip %v: %q, want %q", gz, strings.Join(got, "|"), want)
		}
		if err := rewriteContext(bytes.NewReader(raw.Bytes()), io.Discard, "other/Dockerfile", nil); err == nil {
			t.Errorf("a context without the Dockerfile was rewritten")
		}
	}
}

// pullEngine is a fake engine for pulls through the proxy: it pulls the
// proxy's name (its progress naming it), names images as asked, and
// records what it was asked.
type pullEngine struct {
	mu    sync.Mutex
	calls []string
	fail  string
}

func (f *pullEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := versionPrefix.ReplaceAllString(r.URL.Path, "/")
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+p+"?"+r.URL.RawQuery)
	fail := f.fail
	f.mu.Unlock()
	q := r.URL.Query()
	switch {
	case r.Method == "POST" && p == "/images/create":
		img := q.Get("fromImage")
		io.WriteString(w, `{"status":"Pulling from `+strings.TrimPrefix(img, "127.0.0.1:")+`"}`+"\n")
		if fail != "" {
			io.WriteString(w, `{"error":"`+fail+` `+img+`"}`+"\n")
			return
		}
		io.WriteString(w, `{"status":"Downloaded newer image for `+img+`:`+q.Get("tag")+`"}`+"\n")
	case r.Method == "GET" && strings.HasPrefix(p, "/images/") && strings.HasSuffix(p, "/json"):
		ref := strings.TrimSuffix(strings.TrimPrefix(p, "/images/"), "/json")
		if strings.HasPrefix(ref, "127.0.0.1:") && strings.Contains(ref, "@") || strings.HasPrefix(ref, "sha256:") {
			io.WriteString(w, `{"Id":"sha256:imageid"}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"No such image: `+ref+`"}`)
	case r.Method == "POST" && strings.HasSuffix(p, "/tag"):
		w.WriteHeader(http.StatusCreated)
	case r.Method == "DELETE":
		io.WriteString(w, `[]`)
	case r.Method == "POST" && p == "/containers/create":
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.calls = append(f.calls, "body "+string(body))
		f.mu.Unlock()
		io.WriteString(w, `{"Id":"c1"}`)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (f *pullEngine) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// TestServePullNames: the engine pulls the proxy's name; the client sees
// its own name in the progress, the image gets it (a tag) and loses the
// proxy's; a digest pull is resolved by the broker afterwards for an
// inspect and a create; an --all-tags pull is refused.
func TestServePullNames(t *testing.T) {
	dir := t.TempDir()
	enginePath, brokerPath := filepath.Join(dir, "engine.sock"), filepath.Join(dir, "broker.sock")
	el, err := net.Listen("unix", enginePath)
	if err != nil {
		t.Fatal(err)
	}
	fe := &pullEngine{}
	es := &http.Server{Handler: fe}
	go es.Serve(el)
	t.Cleanup(func() { es.Close() })
	b := New(Config{Scope: Scope{Session: "run-1", Workspace: dir}, Engine: enginePath,
		AllowRegistry: func(string) error { return nil }, AllowFetch: func(string) error { return nil }})
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
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, "http://docker/v1.41"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}

	code, out := do("POST", "/images/create?fromImage=ghcr.io/o/tools&tag=1", "")
	if code != 200 || !strings.Contains(out, "Downloaded newer image for ghcr.io/o/tools:1") || strings.Contains(out, "127.0.0.1") {
		t.Errorf("the pull's progress: %d %q, want the client's name only", code, out)
	}
	var tagged, removed bool
	for _, l := range fe.log() {
		if strings.HasPrefix(l, "POST /images/127.0.0.1:") && strings.Contains(l, "/o/tools:1/tag?") {
			v, _ := url.ParseQuery(l[strings.Index(l, "?")+1:])
			tagged = v.Get("repo") == "ghcr.io/o/tools" && v.Get("tag") == "1"
		}
		if strings.HasPrefix(l, "DELETE /images/127.0.0.1:") && strings.Contains(l, "/o/tools:1?") {
			removed = true
		}
	}
	if !tagged || !removed {
		t.Errorf("the engine's calls: %v, want the proxy's name tagged ghcr.io/o/tools:1 and removed", fe.log())
	}

	ref := "ghcr.io/o/tools@" + testDigest
	if code, out := do("GET", "/images/"+ref+"/json", ""); code != http.StatusNotFound {
		t.Errorf("inspect by digest before its pull: %d %q", code, out)
	}
	if code, out := do("POST", "/images/create?fromImage="+url.QueryEscape(ref), ""); code != 200 || strings.Contains(out, "127.0.0.1") {
		t.Errorf("the digest pull: %d %q", code, out)
	}
	if code, out := do("GET", "/images/"+ref+"/json", ""); code != 200 || !strings.Contains(out, "sha256:imageid") {
		t.Errorf("inspect by digest after its pull: %d %q", code, out)
	}
	if code, out := do("POST", "/containers/create", `{"Image":"`+ref+`","Cmd":["true"]}`); code/100 != 2 {
		t.Errorf("create by digest: %d %q", code, out)
	}
	var body string
	for _, l := range fe.log() {
		if s, ok := strings.CutPrefix(l, "body "); ok {
			body = s
		}
	}
	var m map[string]any
	if json.Unmarshal([]byte(body), &m) != nil || m["Image"] != "sha256:imageid" {
		t.Errorf("the create the engine got: %s, want Image sha256:imageid", body)
	}

	if code, out := do("POST", "/images/create?fromImage=ghcr.io/o/tools", ""); code != http.StatusForbidden || !strings.Contains(out, "--all-tags") {
		t.Errorf("an --all-tags pull: %d %q", code, out)
	}
	fe.mu.Lock()
	fe.fail = "manifest unknown for"
	fe.mu.Unlock()
	if code, out := do("POST", "/images/create?fromImage=ghcr.io/o/gone&tag=1", ""); code != 200 || !strings.Contains(out, "manifest unknown for ghcr.io/o/gone") || strings.Contains(out, "127.0.0.1") {
		t.Errorf("a failed pull: %d %q, want its error in the client's name", code, out)
	}
}
