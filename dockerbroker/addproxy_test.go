// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// TestAddProxy: an ADD URL of an allowed host is fetched through the
// broker's fetch proxy, byte for byte, with the headers that name and
// date the file; its redirect to a host the policy lacks is refused,
// reported once, and that host gets nothing; a URL of no build in
// progress is not fetched.
func TestAddProxy(t *testing.T) {
	var mu sync.Mutex
	var denied []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		denied = append(denied, r.URL.String())
		mu.Unlock()
		_, _ = io.WriteString(w, "secret")
	}))
	defer other.Close()
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/dir/a.tar":
			if r.URL.RawQuery != "v=1" {
				http.Error(w, "the query was lost: "+r.URL.RawQuery, http.StatusBadRequest)
				return
			}
			w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
			w.Header().Set("Content-Disposition", `attachment; filename="a.tar"`)
			_, _ = io.WriteString(w, "the file")
		case "/same":
			http.Redirect(w, r, "/dir/a.tar?v=1", http.StatusFound)
		case "/out":
			http.Redirect(w, r, other.URL+"/x?d=exfiltrated", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer allowed.Close()
	host := strings.TrimPrefix(allowed.URL, "http://")
	var refusals []string
	b := New(Config{
		AllowFetch: func(hp string) error {
			if hp == host {
				return nil
			}
			return &net.AddrError{Err: "not in the session's allowlist", Addr: hp}
		},
		OnRefuse: func(rf *Refusal) { mu.Lock(); refusals = append(refusals, rf.Why); mu.Unlock() },
	})
	defer b.Close()
	file, same, out := allowed.URL+"/dir/a.tar?v=1", allowed.URL+"/same", allowed.URL+"/out"
	subst, done, err := b.adds.add([]BuildURL{{URL: file}, {URL: same}, {URL: out}, {URL: file}})
	if err != nil {
		t.Fatal(err)
	}
	if len(subst) != 3 {
		t.Fatalf("subst %v, want one proxy URL per URL", subst)
	}
	for orig, p := range subst {
		pu, _ := url.Parse(p)
		ou, _ := url.Parse(orig)
		if pu.Hostname() != "127.0.0.1" || pu.RawQuery != "" || !strings.HasSuffix(pu.Path, ou.Path) {
			t.Errorf("%s -> %s: want a loopback URL ending in the same path, without the query", orig, p)
		}
	}
	get := func(u string) (int, string, http.Header) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header
	}
	for _, u := range []string{file, same} {
		st, body, h := get(subst[u])
		if st != 200 || body != "the file" || h.Get("Last-Modified") == "" || h.Get("Content-Disposition") == "" {
			t.Errorf("%s: %d %q %v", u, st, body, h)
		}
	}
	for i := 0; i < 2; i++ {
		st, body, _ := get(subst[out])
		if st != http.StatusForbidden || !strings.Contains(body, strings.TrimPrefix(other.URL, "http://")) || !strings.Contains(body, "redirects") {
			t.Errorf("the redirect off the allowed host: %d %q, want 403 naming the host", st, body)
		}
	}
	mu.Lock()
	if len(denied) != 0 {
		t.Errorf("the host the policy lacks got %v", denied)
	}
	if len(refusals) != 1 || !strings.Contains(refusals[0], "ADD "+out) {
		t.Errorf("refusals %q, want one naming the ADD", refusals)
	}
	mu.Unlock()
	done()
	if st, _, _ := get(subst[file]); st != http.StatusNotFound {
		t.Errorf("after the build: %d, want 404", st)
	}
}

func TestRewriteAdds(t *testing.T) {
	subst := map[string]string{"http://h/a": "http://127.0.0.1:1/t/0/a", "https://h/b": "http://127.0.0.1:1/t/1/b"}
	for _, c := range []struct{ in, want string }{
		{"FROM x\nADD http://h/a /d/\n", "FROM x\nADD http://127.0.0.1:1/t/0/a /d/\n"},
		{"FROM x\nadd http://h/a http://h/a https://h/b /d/\r\n", "FROM x\nadd http://127.0.0.1:1/t/0/a http://127.0.0.1:1/t/0/a http://127.0.0.1:1/t/1/b /d/\r\n"},
		{"FROM x\nADD [\"http://h/a\",\"/d/\"]\n", "FROM x\nADD [\"http://127.0.0.1:1/t/0/a\",\"/d/\"]\n"},
		{"FROM x\nADD --chown=1 \\\n  http://h/a /d/\n", "FROM x\nADD --chown=1 \\\n  http://127.0.0.1:1/t/0/a /d/\n"},
		// Not an ADD's, not the whole word: kept.
		{"FROM x\nRUN curl http://h/a\nADD http://h/ab /d\n", "FROM x\nRUN curl http://h/a\nADD http://h/ab /d\n"},
	} {
		got, err := rewriteAdds([]byte(c.in), subst)
		if err != nil || string(got) != c.want {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
}

// TestAddRewriter: the build's output names the URLs as written, also
// when a line comes in pieces or is longer than the rewriter's window.
func TestAddRewriter(t *testing.T) {
	subst := map[string]string{"https://h/a": "http://127.0.0.1:1/t/0/a"}
	long := strings.Repeat("x", addLineMax+100)
	in := `{"stream":"Step 2/3 : ADD http://127.0.0.1:1/t/0/a /a"}` + "\r\n" + long + "\n" + `{"stream":"http://127.0.0.1:1/t/0/a"}`
	want := `{"stream":"Step 2/3 : ADD https://h/a /a"}` + "\r\n" + long + "\n" + `{"stream":"https://h/a"}`
	r := newAddRewriter(io.NopCloser(&slowReader{s: in, n: 7}), subst)
	got, err := io.ReadAll(r)
	if err != nil || string(got) != want {
		t.Errorf("rewritten: %d bytes, %v; want %d bytes", len(got), err, len(want))
	}
}

// slowReader gives at most n bytes per read.
type slowReader struct {
	s string
	n int
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	k := min(r.n, len(p), len(r.s))
	copy(p, r.s[:k])
	r.s = r.s[k:]
	return k, nil
}
