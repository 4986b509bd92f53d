// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestReadHead(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		method   string
		target   string
		minor    int
		err      string // substring; "" means valid
	}{
		{name: "connect", in: "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n", method: "CONNECT", target: "a.test:443", minor: 1},
		{name: "http/1.0", in: "GET http://a.test/ HTTP/1.0\r\n\r\n", method: "GET", target: "http://a.test/", minor: 0},
		{name: "bare LF", in: "GET http://a.test/ HTTP/1.1\nHost: a.test\n\n", method: "GET", target: "http://a.test/", minor: 1},
		{name: "leading CRLF", in: "\r\nGET http://a.test/ HTTP/1.1\r\n\r\n", method: "GET", target: "http://a.test/", minor: 1},
		{name: "many empty lines", in: strings.Repeat("\r\n", 10) + "GET / HTTP/1.1\r\n\r\n", err: "empty lines"},
		{name: "no version", in: "GET http://a.test/\r\n\r\n", err: "malformed request line"},
		{name: "http/0.9", in: "GET /\r\n\r\n", err: "malformed request line"},
		{name: "double space", in: "GET  http://a.test/ HTTP/1.1\r\n\r\n", err: "malformed request line"},
		{name: "space in target", in: "GET http://a.test/a b HTTP/1.1\r\n\r\n", err: "unsupported protocol"},
		{name: "http/2", in: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", err: "unsupported protocol"},
		{name: "lower-case version", in: "GET http://a.test/ http/1.1\r\n\r\n", err: "unsupported protocol"},
		{name: "bad method", in: "G(T http://a.test/ HTTP/1.1\r\n\r\n", err: "malformed request line"},
		{name: "control in target", in: "GET http://a.test/\x01 HTTP/1.1\r\n\r\n", err: "control character"},
		{name: "space before colon", in: "GET http://a.test/ HTTP/1.1\r\nHost : a.test\r\n\r\n", err: "malformed header name"},
		{name: "space in name", in: "GET http://a.test/ HTTP/1.1\r\nX Y: z\r\n\r\n", err: "malformed header name"},
		{name: "no colon", in: "GET http://a.test/ HTTP/1.1\r\nHost\r\n\r\n", err: "malformed header"},
		{name: "leading fold", in: "GET http://a.test/ HTTP/1.1\r\n Host: a.test\r\n\r\n", err: "malformed header"},
		{name: "NUL in value", in: "GET http://a.test/ HTTP/1.1\r\nX: a\x00b\r\n\r\n", err: "malformed header"},
		{name: "TLS hello", in: "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", err: "malformed request line"},
		{name: "truncated", in: "GET http://a.test/ HTTP/1.1\r\nHost: a", err: "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := readHead(bufio.NewReader(strings.NewReader(tc.in)))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("readHead = %+v, %v; want error containing %q", h, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.method != tc.method || h.target != tc.target || h.minor != tc.minor {
				t.Errorf("readHead = %+v", h)
			}
		})
	}
}

// TestConnect drives CONNECT requests through a loopback proxy whose
// non-loopback dials reach an echo server. Each refused or malformed
// request must be answered as documented and must not be dialled.
func TestConnect(t *testing.T) {
	f := newFixture(t, fixtureOpts{
		policy:   mustPolicy(t, "allowed.test", "203.0.113.0/28"),
		resolver: map[string]string{"allowed.test": "203.0.113.10", "rebind.test": "127.0.0.1"},
	})
	for _, tc := range []struct {
		name   string
		req    string
		status int
		body   string // substring of the refusal's body
		dial   string // the address dialled, "" for none
	}{
		{name: "allowed", req: "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n", status: 200, dial: "203.0.113.10:443"},
		{name: "no host header", req: "CONNECT allowed.test:443 HTTP/1.1\r\n\r\n", status: 200, dial: "203.0.113.10:443"},
		{name: "host without port", req: "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n", status: 200, dial: "203.0.113.10:443"},
		{name: "http/1.0", req: "CONNECT ALLOWED.test.:443 HTTP/1.0\r\n\r\n", status: 200, dial: "203.0.113.10:443"},
		{name: "proxy-authorization ignored", req: "CONNECT allowed.test:443 HTTP/1.1\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\n\r\n", status: 200, dial: "203.0.113.10:443"},
		{name: "covered IP literal", req: "CONNECT 203.0.113.5:22 HTTP/1.1\r\n\r\n", status: 200, dial: "203.0.113.5:22"},

		{name: "denied name", req: "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n", status: 403,
			body: "sluice: CONNECT to evil.example:443 refused: evil.example is not in the allowlist"},
		{name: "IP literal", req: "CONNECT 203.0.113.20:443 HTTP/1.1\r\n\r\n", status: 403,
			body: "sluice: CONNECT to 203.0.113.20:443 refused: 203.0.113.20 is an IP address that no allowlist entry covers"},
		{name: "IPv6 literal", req: "CONNECT [2001:db8:3::20]:443 HTTP/1.1\r\n\r\n", status: 403, body: "no allowlist entry covers"},
		{name: "rebinding", req: "CONNECT rebind.test:443 HTTP/1.1\r\n\r\n", status: 403, body: "rebind.test is not in the allowlist"},
		{name: "numeric name", req: "CONNECT 127.1:22 HTTP/1.1\r\n\r\n", status: 403, body: "not a valid host name"},

		{name: "absolute URI", req: "CONNECT http://allowed.test:443/ HTTP/1.1\r\n\r\n", status: 400, body: "must be host:port"},
		{name: "path", req: "CONNECT /allowed.test:443 HTTP/1.1\r\n\r\n", status: 400, body: "must be host:port"},
		{name: "userinfo", req: "CONNECT allowed.test@evil.example:443 HTTP/1.1\r\n\r\n", status: 400, body: "userinfo"},
		{name: "missing port", req: "CONNECT allowed.test HTTP/1.1\r\n\r\n", status: 400, body: "no port"},
		{name: "unbracketed IPv6", req: "CONNECT 2001:db8::1:443 HTTP/1.1\r\n\r\n", status: 400, body: "brackets"},
		{name: "host mismatch", req: "CONNECT allowed.test:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n", status: 400, body: "different authority"},
		{name: "host port mismatch", req: "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:22\r\n\r\n", status: 400, body: "different authority"},
		{name: "two hosts", req: "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\nHost: evil.example:443\r\n\r\n", status: 400, body: "2 Host headers"},
		{name: "body", req: "CONNECT allowed.test:443 HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", status: 400, body: "has no body"},
		{name: "chunked body", req: "CONNECT allowed.test:443 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", status: 400, body: "has no body"},
		{name: "origin-form GET", req: "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", status: 400, body: "not a web server"},
		{name: "garbage", req: "\x16\x03\x01\x00\x05hello\r\n\r\n", status: 400, body: "malformed request line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.rec.Dials())
			resp, body, c, br := f.roundTrip(t, tc.req)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %s, want %d; body %q", resp.Status, tc.status, body)
			}
			dials := f.rec.Dials()[before:]
			if tc.dial == "" && len(dials) > 0 {
				t.Errorf("dialled %v, want no dial", dials)
			}
			if tc.dial != "" && (len(dials) != 1 || dials[0].String() != tc.dial) {
				t.Errorf("dialled %v, want %s", dials, tc.dial)
			}
			if tc.status == 200 {
				// The tunnel carries bytes both ways and passes on the
				// half-close.
				if _, err := io.WriteString(c, "ping"); err != nil {
					t.Fatal(err)
				}
				c.(*net.TCPConn).CloseWrite()
				got, err := io.ReadAll(br)
				if err != nil || string(got) != "ping" {
					t.Errorf("through the tunnel: %q, %v", got, err)
				}
				return
			}
			if !strings.Contains(body, tc.body) {
				t.Errorf("body %q, want it to contain %q", body, tc.body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if ps := resp.Header.Get("Proxy-Status"); !strings.HasPrefix(ps, "sluice; error=") {
				t.Errorf("Proxy-Status %q", ps)
			}
			if !resp.Close {
				t.Error("refusal does not close the connection")
			}
			expectClosed(t, br)
		})
	}
}

// TestConnectPipelined: what the client sends after the CONNECT head,
// before the 200 (a second CONNECT included), is tunnel data for the first
// target: it is forwarded verbatim and never interpreted.
func TestConnectPipelined(t *testing.T) {
	f := newFixture(t, fixtureOpts{
		// Judged by address: on a name's address the tunnel's first
		// bytes, an HTTP head, would be judged (names_test.go).
		policy:   verifyPolicy(t, "allowed.test=address"),
		resolver: map[string]string{"allowed.test": "203.0.113.10"},
	})
	second := "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\nGET http://evil.example/ HTTP/1.1\r\n\r\n"
	c := f.dial(t)
	if _, err := io.WriteString(c, "CONNECT allowed.test:8443 HTTP/1.1\r\n\r\n"+second); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, _ := readResp(t, br, http.MethodConnect)
	if resp.StatusCode != 200 {
		t.Fatalf("status %s", resp.Status)
	}
	// And more, after the 200.
	if _, err := io.WriteString(c, second); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != second+second {
		t.Errorf("the echo behind the tunnel got %q, want the pipelined bytes verbatim", got)
	}
	if d := f.rec.Dials(); len(d) != 1 || d[0].String() != "203.0.113.10:8443" {
		t.Errorf("dials %v, want only the tunnel's", d)
	}
	for _, e := range f.rec.Events() {
		t.Errorf("unexpected event %v", e)
	}
}

// TestRefusalPipelined: after a refused CONNECT, the pipelined second
// request is not served.
func TestRefusalPipelined(t *testing.T) {
	f := newFixture(t, fixtureOpts{
		policy:   mustPolicy(t, "allowed.test"),
		resolver: map[string]string{"allowed.test": "203.0.113.10"},
	})
	resp, _, _, br := f.roundTrip(t, "CONNECT evil.example:443 HTTP/1.1\r\n\r\nCONNECT allowed.test:443 HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 403 {
		t.Fatalf("status %s", resp.Status)
	}
	expectClosed(t, br)
	if d := f.rec.Dials(); len(d) > 0 {
		t.Errorf("dialled %v", d)
	}
}

// origin is a loopback HTTP server standing in for the destination of
// absolute-form requests; it records what it received.
type origin struct {
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func startOrigin(t testing.TB, o *origin) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		o.mu.Lock()
		o.reqs = append(o.reqs, r)
		o.body = append(o.body, string(b))
		o.mu.Unlock()
		switch r.URL.Path {
		case "/chunked":
			w.Header().Set("X-Origin", "yes")
			w.Write([]byte("part one, "))
			w.(http.Flusher).Flush()
			w.Write([]byte("part two"))
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Connection", "X-Hop")
			w.Header().Set("X-Hop", "must not reach the client")
			w.Header().Set("Keep-Alive", "timeout=5")
			w.Header().Set("Content-Length", fmt.Sprint(len("hello from "+r.URL.Path)))
			fmt.Fprintf(w, "hello from %s", r.URL.Path)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func (o *origin) last(t testing.TB) (*http.Request, string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.reqs) == 0 {
		t.Fatal("the origin received nothing")
	}
	return o.reqs[len(o.reqs)-1], o.body[len(o.body)-1]
}

func (o *origin) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.reqs)
}

// TestHTTPForward: absolute-form requests reach the origin in origin form,
// without hop-by-hop headers or proxy credentials, and the responses come
// back re-framed.
func TestHTTPForward(t *testing.T) {
	o := &origin{}
	f := newFixture(t, fixtureOpts{
		policy:   mustPolicy(t, "allowed.test"),
		resolver: map[string]string{"allowed.test": "203.0.113.10"},
		standIn:  startOrigin(t, o),
	})

	t.Run("get", func(t *testing.T) {
		resp, body, _, _ := f.roundTrip(t, "GET http://allowed.test/path?q=1 HTTP/1.1\r\n"+
			"Host: allowed.test\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"+
			"Connection: X-Private, keep-alive\r\nX-Private: hop\r\nKeep-Alive: 5\r\nTE: trailers\r\nUpgrade: websocket\r\nX-End: kept\r\n\r\n")
		if resp.StatusCode != 200 || body != "hello from /path" {
			t.Fatalf("%s %q", resp.Status, body)
		}
		if resp.Header.Get("Keep-Alive") != "" {
			t.Errorf("hop-by-hop response headers reached the client: %v", resp.Header)
		}
		r, _ := o.last(t)
		if r.Host != "allowed.test" || r.RequestURI != "/path?q=1" {
			t.Errorf("origin got Host %q target %q", r.Host, r.RequestURI)
		}
		for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "X-Private", "Keep-Alive", "Te", "Upgrade"} {
			if v := r.Header.Get(h); v != "" {
				t.Errorf("origin got %s: %q", h, v)
			}
		}
		if r.Header.Get("X-End") != "kept" {
			t.Errorf("end-to-end header lost: %v", r.Header)
		}
		if d := f.rec.Dials(); d[len(d)-1].String() != "203.0.113.10:80" {
			t.Errorf("dialled %v", d)
		}
	})

	t.Run("keep-alive, each request judged", func(t *testing.T) {
		c := f.dial(t)
		br := bufio.NewReader(c)
		for i, path := range []string{"/one", "/two"} {
			fmt.Fprintf(c, "GET http://allowed.test:80%s HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n", path)
			resp, body := readResp(t, br, "GET")
			if resp.StatusCode != 200 || body != "hello from "+path || resp.Close {
				t.Fatalf("request %d: %s %q close=%v", i, resp.Status, body, resp.Close)
			}
		}
		// A denied one on the same connection is refused and ends it.
		n := o.count()
		fmt.Fprintf(c, "GET http://evil.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\nGET http://allowed.test/three HTTP/1.1\r\n\r\n")
		resp, body := readResp(t, br, "GET")
		if resp.StatusCode != 403 || !strings.Contains(body, "sluice: GET to evil.example:80 refused: evil.example is not in the allowlist") {
			t.Fatalf("%s %q", resp.Status, body)
		}
		expectClosed(t, br)
		if o.count() != n {
			t.Error("the request pipelined after the refusal was served")
		}
	})

	t.Run("pipelined", func(t *testing.T) {
		c := f.dial(t)
		io.WriteString(c, "GET http://allowed.test/a HTTP/1.1\r\n\r\nHEAD http://allowed.test/b HTTP/1.1\r\n\r\nGET http://allowed.test/c HTTP/1.1\r\nConnection: close\r\n\r\n")
		br := bufio.NewReader(c)
		for _, m := range []struct{ method, body string }{{"GET", "hello from /a"}, {"HEAD", ""}, {"GET", "hello from /c"}} {
			resp, body := readResp(t, br, m.method)
			if resp.StatusCode != 200 || body != m.body {
				t.Fatalf("%s: %s %q", m.method, resp.Status, body)
			}
			if m.method == "HEAD" && resp.ContentLength != int64(len("hello from /b")) {
				t.Errorf("HEAD Content-Length %d", resp.ContentLength)
			}
		}
		expectClosed(t, br)
	})

	t.Run("post content-length", func(t *testing.T) {
		resp, body, _, _ := f.roundTrip(t, "POST http://allowed.test/post HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world")
		if resp.StatusCode != 200 || body != "hello from /post" {
			t.Fatalf("%s %q", resp.Status, body)
		}
		if _, b := o.last(t); b != "hello world" {
			t.Errorf("origin got body %q", b)
		}
	})

	t.Run("post chunked with trailer", func(t *testing.T) {
		resp, body, c, br := f.roundTrip(t, "POST http://allowed.test/post HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"+
			"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
		if resp.StatusCode != 200 || body != "hello from /post" {
			t.Fatalf("%s %q", resp.Status, body)
		}
		if _, b := o.last(t); b != "hello world" {
			t.Errorf("origin got body %q", b)
		}
		// The connection is at a request boundary after the trailer.
		io.WriteString(c, "GET http://allowed.test/after HTTP/1.1\r\n\r\n")
		if resp, body := readResp(t, br, "GET"); resp.StatusCode != 200 || body != "hello from /after" {
			t.Errorf("next request: %s %q", resp.Status, body)
		}
	})

	t.Run("expect 100-continue", func(t *testing.T) {
		c := f.dial(t)
		io.WriteString(c, "PUT http://allowed.test/put HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
			t.Fatalf("want 100 Continue, got %q %v", line, err)
		}
		if rest, _ := br.ReadString('\n'); rest != "\r\n" {
			t.Fatalf("100 Continue followed by %q", rest)
		}
		io.WriteString(c, "data")
		if resp, body := readResp(t, br, "PUT"); resp.StatusCode != 200 || body != "hello from /put" {
			t.Fatalf("%s %q", resp.Status, body)
		}
		if _, b := o.last(t); b != "data" {
			t.Errorf("origin got %q", b)
		}
	})

	t.Run("chunked response streams", func(t *testing.T) {
		resp, body, _, _ := f.roundTrip(t, "GET http://allowed.test/chunked HTTP/1.1\r\n\r\n")
		if resp.StatusCode != 200 || body != "part one, part two" || resp.Header.Get("X-Origin") != "yes" {
			t.Fatalf("%s %q %v", resp.Status, body, resp.Header)
		}
		if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
			t.Errorf("transfer encoding %v, want chunked", resp.TransferEncoding)
		}
	})

	t.Run("http/1.0 client", func(t *testing.T) {
		resp, body, _, br := f.roundTrip(t, "GET http://allowed.test/chunked HTTP/1.0\r\n\r\n")
		if resp.StatusCode != 200 || body != "part one, part two" || len(resp.TransferEncoding) != 0 {
			t.Fatalf("%s %q %v", resp.Status, body, resp.TransferEncoding)
		}
		expectClosed(t, br)
	})

	t.Run("no content", func(t *testing.T) {
		resp, body, _, _ := f.roundTrip(t, "GET http://allowed.test/nocontent HTTP/1.1\r\n\r\n")
		if resp.StatusCode != 204 || body != "" {
			t.Fatalf("%s %q", resp.Status, body)
		}
	})
}

// TestHTTPRefusals: malformed, relayed and denied absolute-form requests
// get 400 or 403 and are never dialled.
func TestHTTPRefusals(t *testing.T) {
	o := &origin{}
	f := newFixture(t, fixtureOpts{
		policy:   mustPolicy(t, "allowed.test"),
		resolver: map[string]string{"allowed.test": "203.0.113.10", "meta.test": "169.254.169.254"},
		standIn:  startOrigin(t, o),
	})
	for _, tc := range []struct {
		name, req string
		status    int
		body      string
	}{
		{"origin-form", "GET /index.html HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "not a web server"},
		{"asterisk", "OPTIONS * HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 400, "not a web server"},
		{"https", "GET https://allowed.test/ HTTP/1.1\r\n\r\n", 400, "use CONNECT for https"},
		{"ftp", "GET ftp://allowed.test/ HTTP/1.1\r\n\r\n", 400, "not supported"},
		{"authority-form GET", "GET allowed.test:80 HTTP/1.1\r\n\r\n", 400, "neither an absolute"},
		{"host mismatch", "GET http://allowed.test/ HTTP/1.1\r\nHost: evil.example\r\n\r\n", 400, "different authority"},
		{"host port mismatch", "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n", 400, "different authority"},
		{"two hosts", "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nHost: evil.example\r\n\r\n", 400, "2 Host headers"},
		{"userinfo", "GET http://allowed.test@evil.example/ HTTP/1.1\r\n\r\n", 400, "userinfo"},
		{"fragment", "GET http://allowed.test/#x HTTP/1.1\r\n\r\n", 400, "fragment"},
		{"TE and CL", "POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "ambiguous framing"},
		{"two CL", "POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd", 400, "2 Content-Length"},
		{"bad CL", "POST http://allowed.test/ HTTP/1.1\r\nContent-Length: +4\r\n\r\nabcd", 400, "not a length"},
		{"gzip TE", "POST http://allowed.test/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 400, "chunked only"},
		{"TE in 1.0", "POST http://allowed.test/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "HTTP/1.0"},
		{"denied", "GET http://evil.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\n", 403, "sluice: GET to evil.example:80 refused: evil.example is not in the allowlist"},
		{"IP literal", "GET http://203.0.113.20:8080/ HTTP/1.1\r\n\r\n", 403, "203.0.113.20 is an IP address that no allowlist entry covers"},
		{"rebinding", "GET http://meta.test/latest/meta-data/ HTTP/1.1\r\n\r\n", 403, "meta.test is not in the allowlist"},
		{"too large", "GET http://allowed.test/ HTTP/1.1\r\nX: " + strings.Repeat("a", maxHeadBytes+8192) + "\r\n\r\n", 431, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, d := o.count(), len(f.rec.Dials())
			resp, body, _, br := f.roundTrip(t, tc.req)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.body) {
				t.Fatalf("%s %q, want %d containing %q", resp.Status, body, tc.status, tc.body)
			}
			expectClosed(t, br)
			if o.count() != n || len(f.rec.Dials()) != d {
				t.Error("the request reached the origin")
			}
		})
	}
}

// TestHTTPRebindingPrivateAllowed: allow_private lets a name resolve
// inside, here to loopback.
func TestHTTPRebindingPrivateAllowed(t *testing.T) {
	o := &origin{}
	addr := startOrigin(t, o)
	_, port, _ := net.SplitHostPort(addr)
	f := newFixture(t, fixtureOpts{
		policy:   mustPolicy(t, "private:intranet.test"),
		resolver: map[string]string{"intranet.test": "127.0.0.1"},
	})
	resp, body, _, _ := f.roundTrip(t, "GET http://intranet.test:"+port+"/x HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 || body != "hello from /x" {
		t.Fatalf("%s %q", resp.Status, body)
	}
}

// TestUpstreamFailures: an allowed destination that cannot be reached is
// 502, and a dial timeout 504.
func TestUpstreamFailures(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	f := newFixture(t, fixtureOpts{})
	resp, body, _, _ := f.roundTrip(t, fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", closedPort))
	if resp.StatusCode != 502 || !strings.Contains(body, "failed") || !strings.Contains(body, "refused") {
		t.Errorf("%s %q", resp.Status, body)
	}
	if ps := resp.Header.Get("Proxy-Status"); !strings.Contains(ps, "connection_refused") {
		t.Errorf("Proxy-Status %q", ps)
	}
	e := f.rec.waitEvent(t, 0, func(e Event) bool { return e.Kind == EventFailed })
	if e.Protocol != ProtoConnect || e.Port != uint16(closedPort) || e.Host != "127.0.0.1" {
		t.Errorf("event %+v", e)
	}

	resp, body, _, _ = f.roundTrip(t, "GET http://unknown.localhost.invalid/ HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 403 {
		t.Errorf("%s %q", resp.Status, body)
	}
}

// TestSlowHead: a client that does not finish its head within Timeout gets
// 408 and an event.
func TestSlowHead(t *testing.T) {
	f := newFixture(t, fixtureOpts{timeout: 200 * time.Millisecond})
	c := f.dial(t)
	io.WriteString(c, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n")
	resp, _ := readResp(t, bufio.NewReader(c), "")
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %s", resp.Status)
	}
	f.rec.waitEvent(t, 0, func(e Event) bool {
		return e.Kind == EventMalformed && strings.Contains(e.Reason, "no complete request head")
	})

	// Silent clients are dropped without a reply.
	c = f.dial(t)
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("silent client: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("silent client dropped after %v", d)
	}
}

// startRaw serves each loopback connection with handle.
func startRaw(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(ioTimeout))
				handle(c)
			})
		}
	})
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return l.Addr().String()
}

// TestHTTPUpstreamMisbehaves: an upstream that hangs up, answers before the
// body is in, switches protocols unasked or frames its response oddly gets
// a 502 or a clean close, never a confused client connection.
func TestHTTPUpstreamMisbehaves(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handle  func(net.Conn)
		req     string
		status  int
		body    string
		closed  bool   // the client connection must close after the response
		hdrGone string // a response header that must not reach the client
	}{
		{
			name:   "hangs up",
			handle: func(c net.Conn) { bufio.NewReader(c).ReadString('\n') },
			req:    "POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 4\r\n\r\nbody",
			status: 502, body: "reading the response", closed: true,
		},
		{
			name: "early answer",
			handle: func(c net.Conn) {
				bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, "HTTP/1.1 413 Content Too Large\r\nContent-Length: 3\r\n\r\nbig")
			},
			// Only part of the announced body is sent.
			req:    "POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 1000000\r\n\r\npartial",
			status: 413, body: "big", closed: true,
		},
		{
			name: "switching protocols",
			handle: func(c net.Conn) {
				bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			},
			req:    "GET http://allowed.test/ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
			status: 502, body: "switched protocols", closed: true,
		},
		{
			name: "close-delimited body, rechunked",
			handle: func(c net.Conn) {
				br := bufio.NewReader(c)
				for {
					if l, err := br.ReadString('\n'); err != nil || l == "\r\n" {
						break
					}
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close, X-Secret\r\nX-Secret: hop\r\n\r\nuntil the end")
			},
			req:    "GET http://allowed.test/ HTTP/1.1\r\n\r\n",
			status: 200, body: "until the end", hdrGone: "X-Secret",
		},
		{
			name: "truncated body",
			handle: func(c net.Conn) {
				bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
			},
			req:    "GET http://allowed.test/ HTTP/1.1\r\n\r\n",
			status: 200, closed: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{
				policy:   mustPolicy(t, "allowed.test"),
				resolver: map[string]string{"allowed.test": "203.0.113.10"},
				standIn:  startRaw(t, tc.handle),
			})
			c := f.dial(t)
			io.WriteString(c, tc.req)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) {
				t.Errorf("%s %q, want %d containing %q", resp.Status, b, tc.status, tc.body)
			}
			if tc.hdrGone != "" && resp.Header.Get(tc.hdrGone) != "" {
				t.Errorf("%s reached the client", tc.hdrGone)
			}
			if tc.closed {
				expectClosed(t, br)
				return
			}
			// Still usable.
			io.WriteString(c, tc.req)
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != tc.status {
				t.Errorf("second request: %v %v", resp, err)
			}
		})
	}
}

// TestHTTPBadChunkedBody: a chunked body that turns out malformed half way
// ends the exchange with 400 instead of leaving both sides waiting.
func TestHTTPBadChunkedBody(t *testing.T) {
	f := newFixture(t, fixtureOpts{
		policy:   mustPolicy(t, "allowed.test"),
		resolver: map[string]string{"allowed.test": "203.0.113.10"},
		standIn: startRaw(t, func(c net.Conn) {
			io.Copy(io.Discard, c) // waits for a body that never completes
		}),
	})
	start := time.Now()
	resp, body, _, br := f.roundTrip(t, "POST http://allowed.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n")
	if resp.StatusCode != 400 || !strings.Contains(body, "reading the request body") {
		t.Errorf("%s %q", resp.Status, body)
	}
	expectClosed(t, br)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
}
