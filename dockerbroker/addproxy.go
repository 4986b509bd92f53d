// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A build's ADD <URL> is fetched by the engine itself, outside any
// container, and the engine follows the URL's redirects wherever they
// lead: an allowed host with an open redirect
// (https://allowed.example/out?to=https://attacker.example/?d=...) would
// carry the build's fetch, and what the URL says, to a host the session
// may not reach. So the engine never gets the URL: the broker rewrites
// each ADD URL of the Dockerfile to one of its fetch proxy on loopback,
// http://127.0.0.1:PORT/<token>/<n><the URL's path>, and the proxy makes
// the request itself, judging every connection (the URL's host and each
// redirect's) by the session's policy, and passes the answer back byte
// for byte. The path is kept after the prefix, so the file the engine
// names after the URL's last element keeps its name; the query is the
// proxy's to add. What the engine prints of the step names the URL as the
// Dockerfile wrote it (addRewriter).
//
// A base image's ONBUILD ADD of a URL cannot be rewritten (the engine
// reads it from the image), so it is refused (judgePlan).

// addProxy is the session's fetch proxy for builds' ADD URLs.
type addProxy struct {
	b      *Broker
	client *http.Client
	loopbackServer

	mu      sync.Mutex
	fetches map[string]*addFetch
}

// addFetch is one build's URLs, by their index in its proxy paths.
type addFetch struct {
	urls []*url.URL

	mu      sync.Mutex
	refused map[string]bool
}

// addKey is the context key of the fetch (and the URL) a request of the
// proxy's client is for.
type addKey struct{}

type addReq struct {
	f   *addFetch
	src *url.URL
}

func newAddProxy(b *Broker) *addProxy {
	p := &addProxy{b: b, fetches: map[string]*addFetch{}}
	p.loopbackServer = loopbackServer{what: "the build's fetch proxy", handler: p.serveHTTP}
	// The engine gets the bytes as the server sent them.
	p.client = judgedClient(p.dial, p.checkRedirect, false)
	return p
}

// judge judges a connection to hostport made to fetch src; hop says what
// led there ("" for src's own host).
func (p *addProxy) judge(src *url.URL, hop, hostport string) error {
	var err error
	if p.b.cfg.AllowFetch == nil {
		err = fmt.Errorf("%s is not in the session's allowlist", hostport)
	} else {
		err = p.b.cfg.AllowFetch(hostport)
	}
	if err == nil {
		return nil
	}
	why := fmt.Sprintf("ADD %s: %v", src.Redacted(), err)
	if hop != "" {
		why = fmt.Sprintf("ADD %s: %s to %s, which the engine would follow unjudged: %v", src.Redacted(), hop, hostport, err)
	}
	return &hopError{rf: refuse("build", "%s", why)}
}

func (p *addProxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	ar, _ := ctx.Value(addKey{}).(addReq)
	if ar.f == nil {
		return nil, errors.New("a connection for no build")
	}
	hop := ""
	if addr != urlHostPort(ar.src) {
		hop = "a connection"
	}
	if err := p.judge(ar.src, hop, addr); err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 30 * time.Second}
	return d.DialContext(ctx, network, addr)
}

func (p *addProxy) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("more than 10 redirects")
	}
	ar, _ := req.Context().Value(addKey{}).(addReq)
	if ar.f == nil {
		return errors.New("a redirect for no build")
	}
	if req.URL.Scheme != "https" && req.URL.Scheme != "http" {
		return &hopError{rf: refuse("build", "ADD %s redirects to %s, not an http(s) URL", ar.src.Redacted(), req.URL.Redacted())}
	}
	return p.judge(ar.src, "it redirects", urlHostPort(req.URL))
}

// close stops the proxy's listener and its connections.
func (p *addProxy) close() {
	p.loopbackServer.close()
	p.client.CloseIdleConnections()
}

// add serves the build's URLs until done is called: subst maps each one,
// as the Dockerfile writes it, to the proxy's URL for it.
func (p *addProxy) add(urls []BuildURL) (subst map[string]string, done func(), err error) {
	addr, err := p.start()
	if err != nil {
		return nil, nil, err
	}
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	token := hex.EncodeToString(rnd[:])
	f := &addFetch{refused: map[string]bool{}}
	subst = map[string]string{}
	for _, u := range urls {
		if _, ok := subst[u.URL]; ok {
			continue
		}
		src, err := url.Parse(u.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("ADD %s: %w", u.URL, err)
		}
		path := src.EscapedPath()
		if path == "" {
			// The engine names a file of a URL without a path after
			// the answer's Content-Disposition; so must it here.
			path = "/"
		}
		subst[u.URL] = "http://" + addr + "/" + token + "/" + strconv.Itoa(len(f.urls)) + path
		f.urls = append(f.urls, src)
	}
	p.mu.Lock()
	p.fetches[token] = f
	p.mu.Unlock()
	return subst, func() {
		p.mu.Lock()
		delete(p.fetches, token)
		p.mu.Unlock()
	}, nil
}

// addPassed are the answer's headers the engine gets: it names the file
// (Content-Disposition) and dates it (Last-Modified) by them.
var addPassed = []string{"Content-Type", "Content-Length", "Content-Disposition", "Last-Modified", "Etag", "Content-Encoding"}

func (p *addProxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	token, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	idx, _, _ := strings.Cut(rest, "/")
	p.mu.Lock()
	f := p.fetches[token]
	p.mu.Unlock()
	n, err := strconv.Atoi(idx)
	if f == nil || err != nil || n < 0 || n >= len(f.urls) {
		http.Error(w, "sluice: not a URL of this session's builds in progress", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "sluice: the build's fetch proxy only reads", http.StatusMethodNotAllowed)
		return
	}
	src := f.urls[n]
	ctx := context.WithValue(r.Context(), addKey{}, addReq{f: f, src: src})
	req, err := http.NewRequestWithContext(ctx, r.Method, src.String(), nil)
	if err != nil {
		http.Error(w, "sluice: ADD "+src.Redacted()+": "+err.Error(), http.StatusBadGateway)
		return
	}
	for _, k := range []string{"User-Agent", "Accept", "Range", "If-None-Match", "If-Modified-Since"} {
		if v := r.Header.Values(k); len(v) > 0 {
			req.Header[k] = v
		}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		var he *hopError
		if errors.As(err, &he) {
			p.report(f, he.rf)
			http.Error(w, he.rf.Error(), http.StatusForbidden)
			return
		}
		http.Error(w, "sluice: ADD "+src.Redacted()+": "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, k := range addPassed {
		if v := resp.Header.Values(k); len(v) > 0 {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = io.Copy(w, resp.Body)
}

// report tells the broker's OnRefuse of rf, once per build.
func (p *addProxy) report(f *addFetch, rf *Refusal) { p.b.reportOnce(&f.mu, f.refused, rf) }

// rewriteAdds puts each URL of subst (as the Dockerfile writes it) in the
// ADD instructions of text by the proxy's URL for it, as a whole word
// (between spaces, quotes or a JSON list's brackets and commas) on the
// lines of the instruction; every other byte stays. A URL the rewrite
// cannot reach (split across lines) stays, for the caller's second
// judging to find.
func rewriteAdds(text []byte, subst map[string]string) ([]byte, error) {
	if len(subst) == 0 {
		return text, nil
	}
	list, err := parseDockerfile(text)
	if err != nil {
		return nil, err
	}
	lines := bytes.SplitAfter(text, []byte("\n"))
	res := make([]*regexp.Regexp, 0, len(subst))
	urls := make([]string, 0, len(subst))
	for u := range subst {
		res = append(res, regexp.MustCompile(`(^|[ \t"\[,])`+regexp.QuoteMeta(u)+`([ \t"\],\r\n]|$)`))
		urls = append(urls, u)
	}
	for i, in := range list {
		if in.cmd != "add" {
			continue
		}
		end := len(lines) + 1
		if i+1 < len(list) {
			end = list[i+1].line
		}
		for l := in.line; l < end && l <= len(lines); l++ {
			s := string(lines[l-1])
			for j, re := range res {
				// Twice: a URL written twice in a row shares the space
				// between, which one pass matches only once.
				for k := 0; k < 2; k++ {
					s = re.ReplaceAllString(s, "${1}"+subst[urls[j]]+"${2}")
				}
			}
			lines[l-1] = []byte(s)
		}
	}
	return bytes.Join(lines, nil), nil
}

// addRewriter gives the engine's answer to a build back with each proxy
// URL named as the Dockerfile wrote it: the engine prints each step it
// runs. The answer is JSON lines; a URL of a build (no quote, backslash,
// space or control character: judgeAddSource) is the same inside a JSON
// string as outside. Whole lines are rewritten; of a line longer than
// addLineMax, what comes before its last addTailKeep bytes goes out as
// it is read (only what is printed could be split, never the build).
type addRewriter struct {
	body  io.ReadCloser
	rep   *strings.Replacer
	carry []byte // read, not yet rewritten: a line's start
	out   []byte // rewritten, not yet returned
	err   error
	chunk []byte
}

const (
	addLineMax  = 64 << 10
	addTailKeep = 8 << 10
)

func newAddRewriter(body io.ReadCloser, subst map[string]string) *addRewriter {
	var pairs []string
	for orig, proxied := range subst {
		pairs = append(pairs, proxied, orig)
	}
	return &addRewriter{body: body, rep: strings.NewReplacer(pairs...), chunk: make([]byte, 32<<10)}
}

func (a *addRewriter) Read(p []byte) (int, error) {
	for len(a.out) == 0 {
		if a.err != nil {
			if len(a.carry) > 0 {
				a.out, a.carry = []byte(a.rep.Replace(string(a.carry))), nil
				continue
			}
			return 0, a.err
		}
		n, err := a.body.Read(a.chunk)
		a.carry = append(a.carry, a.chunk[:n]...)
		a.err = err
		cut := bytes.LastIndexByte(a.carry, '\n') + 1
		if cut == 0 && len(a.carry) > addLineMax {
			cut = len(a.carry) - addTailKeep
		}
		if cut > 0 {
			a.out = []byte(a.rep.Replace(string(a.carry[:cut])))
			a.carry = append([]byte(nil), a.carry[cut:]...)
		}
	}
	n := copy(p, a.out)
	a.out = a.out[n:]
	return n, nil
}

// Close closes the engine's answer.
func (a *addRewriter) Close() error { return a.body.Close() }
