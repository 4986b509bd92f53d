// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// A pull is not forwarded to the engine as the client asked it: the
// engine would contact the registry itself and follow, unjudged, what
// the registry answers (its auth realm, on another host, and its blob
// redirects, to a CDN). The broker runs a pull-through registry on
// loopback instead, and the engine pulls 127.0.0.1:PORT/<token>/REPO:TAG
// from it (the engine speaks plain HTTP to 127.0.0.0/8). The proxy makes
// the engine's requests to the registry itself, judging every connection
// it makes by the session's policy: the registry, the realm's host and
// every redirect's. It does the token dance with the client's
// credentials and passes manifests and blobs back byte for byte, so
// their digests hold. Once the engine has the image, the broker names it
// as the client asked and removes the proxy's name.

// proxyPull is one pull the proxy serves, by its token.
type proxyPull struct {
	// what names the pull in refusals ("pull of 127.0.0.1:5000/tools:1").
	what string
	// upstream is the registry's host[:port] (RegistryHost), repo the
	// repository path there (library/alpine for alpine).
	upstream, repo string
	// addr is the upstream's host:port, as the proxy dials it.
	addr  string
	creds registryCreds

	// push: the proxy serves a push of repo (pushproxy.go), not a pull.
	push bool

	mu      sync.Mutex
	auth    string          // Authorization for the upstream, once known
	refused map[string]bool // refusals already reported
	// uploads are a push's upload URLs upstream, by the id of the proxy's
	// path the engine was given for each (pushLocation).
	uploads map[string]*url.URL
}

// registryCreds are the client's credentials for a registry, from the
// pull's X-Registry-Auth.
type registryCreds struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// parseRegistryAuth decodes X-Registry-Auth (base64url JSON, padded or
// not); anything undecodable is no credentials.
func parseRegistryAuth(h string) registryCreds {
	var c registryCreds
	if h == "" {
		return c
	}
	raw, err := base64.URLEncoding.DecodeString(h)
	if err != nil {
		if raw, err = base64.RawURLEncoding.DecodeString(h); err != nil {
			if raw, err = base64.StdEncoding.DecodeString(h); err != nil {
				return c
			}
		}
	}
	_ = json.Unmarshal(raw, &c)
	return c
}

// pullProxy is the broker's pull-through registry on loopback, started
// with the session's first pull or push.
type pullProxy struct {
	b      *Broker
	client *http.Client
	loopbackServer

	mu    sync.Mutex
	pulls map[string]*proxyPull
}

func newPullProxy(b *Broker) *pullProxy {
	p := &pullProxy{b: b, pulls: map[string]*proxyPull{}}
	p.loopbackServer = loopbackServer{what: "the pull proxy", handler: p.serveHTTP}
	p.client = judgedClient(p.dial, p.checkRedirect, true)
	return p
}

// hopError is a connection the proxy refused to make.
type hopError struct{ rf *Refusal }

func (e *hopError) Error() string { return e.rf.Why }

// pullKey is the context key of the pull a request of the proxy serves.
type pullKey struct{}

// judgeHop judges a connection to hostport made for pl; hop says what it
// is for ("" for the registry itself).
func (p *pullProxy) judgeHop(pl *proxyPull, hop, hostport string) error {
	var err error
	if p.b.cfg.AllowFetch == nil {
		err = fmt.Errorf("%s is not in the session's allowlist", hostport)
	} else {
		err = p.b.cfg.AllowFetch(hostport)
	}
	if err == nil {
		return nil
	}
	why := fmt.Sprintf("the registry %s: %v", pl.upstream, err)
	if hop != "" {
		why = fmt.Sprintf("the registry %s sends the %s to %s (%s), which the engine would reach unjudged: %v", pl.upstream, pl.verb(), hostport, hop, err)
	}
	return &hopError{rf: refuse(pl.what, "%s", why)}
}

// dial judges every connection the proxy's client makes, whatever made
// it: the registry, a realm, a redirect's target.
func (p *pullProxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	pl, _ := ctx.Value(pullKey{}).(*proxyPull)
	if pl == nil {
		return nil, errors.New("a connection for no pull")
	}
	hop := "a connection"
	if addr == pl.addr {
		hop = ""
	}
	if err := p.judgeHop(pl, hop, addr); err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 30 * time.Second}
	return d.DialContext(ctx, network, addr)
}

// checkRedirect judges a redirect's target before it is followed (the
// dial would too; this names it as a redirect).
func (p *pullProxy) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("more than 10 redirects")
	}
	pl, _ := req.Context().Value(pullKey{}).(*proxyPull)
	if pl == nil {
		return errors.New("a redirect for no pull")
	}
	if req.URL.Scheme != "https" && !(req.URL.Scheme == "http" && loopbackHost(req.URL.Hostname())) {
		return &hopError{rf: refuse(pl.what, "the registry %s redirects to %s, plain HTTP off loopback", pl.upstream, req.URL.Redacted())}
	}
	return p.judgeHop(pl, "a redirect", urlHostPort(req.URL))
}

// urlHostPort is u's host:port, the scheme's port when it names none.
func urlHostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// loopbackHost: 127.0.0.0/8, ::1 or localhost.
func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	return err == nil && a.IsLoopback()
}

// close stops the proxy's listener and its connections.
func (p *pullProxy) close() {
	p.loopbackServer.close()
	p.client.CloseIdleConnections()
}

// add serves pl until the returned func is called; the token names it in
// the proxy's repository paths.
func (p *pullProxy) add(pl *proxyPull) (token string, done func()) {
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	token = hex.EncodeToString(rnd[:])
	pl.refused = map[string]bool{}
	p.mu.Lock()
	p.pulls[token] = pl
	p.mu.Unlock()
	return token, func() {
		p.mu.Lock()
		delete(p.pulls, token)
		p.mu.Unlock()
	}
}

// regError answers the engine in the distribution spec's error form.
func regError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}

// passedHeaders are the upstream's response headers the engine gets.
var passedHeaders = []string{"Content-Type", "Content-Length", "Docker-Content-Digest", "Content-Range", "Accept-Ranges",
	"Etag", "Last-Modified", "Docker-Distribution-API-Version"}

func (p *pullProxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if r.URL.Path == "/v2/" || r.URL.Path == "/v2" {
		// No auth asked of the engine: the proxy authenticates upstream.
		w.WriteHeader(http.StatusOK)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2/")
	token, rest, ok2 := strings.Cut(rest, "/")
	p.mu.Lock()
	pl := p.pulls[token]
	p.mu.Unlock()
	if !ok || !ok2 || pl == nil {
		regError(w, http.StatusNotFound, "NAME_UNKNOWN", "sluice: not a pull of this session's in progress")
		return
	}
	tail, ok := strings.CutPrefix(rest, pl.repo+"/")
	if ok && pl.push {
		p.pushRequest(w, r, pl, token, tail)
		return
	}
	if !ok || !(strings.HasPrefix(tail, "manifests/") || strings.HasPrefix(tail, "blobs/")) || strings.HasPrefix(tail, "blobs/uploads") {
		regError(w, http.StatusNotFound, "NAME_UNKNOWN", "sluice: only "+pl.repo+"'s manifests and blobs are served for this pull")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		regError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "sluice: the pull proxy only reads")
		return
	}
	u := &url.URL{Scheme: upstreamScheme(pl.upstream), Host: pl.upstream, Path: "/v2/" + rest, RawQuery: r.URL.RawQuery}
	hdr := http.Header{}
	for _, k := range []string{"Accept", "Range", "User-Agent", "If-None-Match"} {
		if v := r.Header.Values(k); len(v) > 0 {
			hdr[k] = v
		}
	}
	ctx := context.WithValue(r.Context(), pullKey{}, pl)
	resp, err := p.fetch(ctx, pl, r.Method, u, hdr)
	if err != nil {
		var he *hopError
		if errors.As(err, &he) {
			p.report(pl, he.rf)
			regError(w, http.StatusForbidden, "DENIED", he.rf.Error())
			return
		}
		regError(w, http.StatusBadGateway, "UNKNOWN", "sluice: the registry "+pl.upstream+": "+err.Error())
		return
	}
	defer resp.Body.Close()
	for _, k := range passedHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			w.Header()[k] = v
		}
	}
	// Never WWW-Authenticate: the engine would follow its realm itself.
	w.WriteHeader(resp.StatusCode)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = io.Copy(w, resp.Body)
}

// report tells the broker's OnRefuse of rf, once per pull.
func (p *pullProxy) report(pl *proxyPull, rf *Refusal) { p.b.reportOnce(&pl.mu, pl.refused, rf) }

// fetch makes the request upstream, answering one auth challenge.
func (p *pullProxy) fetch(ctx context.Context, pl *proxyPull, method string, u *url.URL, hdr http.Header) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
		if err != nil {
			return nil, err
		}
		req.Header = hdr.Clone()
		pl.mu.Lock()
		if pl.auth != "" {
			req.Header.Set("Authorization", pl.auth)
		}
		pl.mu.Unlock()
		resp, err := p.client.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusUnauthorized || attempt > 0 {
			return resp, nil
		}
		challenge := resp.Header.Get("WWW-Authenticate")
		if err := p.authorize(ctx, pl, challenge); err != nil {
			resp.Body.Close()
			return nil, err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
}

// authorize answers a registry's challenge: Basic with the client's
// username and password, Bearer with a token from the realm (judged).
func (p *pullProxy) authorize(ctx context.Context, pl *proxyPull, challenge string) error {
	scheme, params := parseChallenge(challenge)
	switch strings.ToLower(scheme) {
	case "basic":
		if pl.creds.Username == "" {
			return fmt.Errorf("the registry asks for a username and password, and the %s has none", pl.verb())
		}
		pl.mu.Lock()
		pl.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(pl.creds.Username+":"+pl.creds.Password))
		pl.mu.Unlock()
		return nil
	case "bearer":
	default:
		return fmt.Errorf("the registry answers 401 with no challenge the proxy knows (%q)", challenge)
	}
	if pl.creds.RegistryToken != "" {
		pl.mu.Lock()
		pl.auth = "Bearer " + pl.creds.RegistryToken
		pl.mu.Unlock()
		return nil
	}
	realm, err := url.Parse(params["realm"])
	if err != nil || realm.Host == "" || realm.Scheme != "https" && !(realm.Scheme == "http" && loopbackHost(realm.Hostname())) {
		return fmt.Errorf("the registry's auth realm %q is not an https URL", params["realm"])
	}
	if err := p.judgeHop(pl, "its auth realm, for a token", urlHostPort(realm)); err != nil {
		return err
	}
	scope := params["scope"]
	if scope == "" {
		scope = "repository:" + pl.repo + ":pull"
	}
	if pl.push {
		// A registry's challenge may name the pull scope only (its
		// answer to a HEAD), and the token is kept for the uploads.
		scope = "repository:" + pl.repo + ":pull,push"
	}
	var req *http.Request
	if pl.creds.IdentityToken != "" {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {pl.creds.IdentityToken},
			"service": {params["service"]}, "scope": {scope}, "client_id": {"sluice"}}
		req, err = http.NewRequestWithContext(ctx, "POST", realm.String(), strings.NewReader(form.Encode()))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		q := realm.Query()
		if s := params["service"]; s != "" {
			q.Set("service", s)
		}
		q.Set("scope", scope)
		realm.RawQuery = q.Encode()
		req, err = http.NewRequestWithContext(ctx, "GET", realm.String(), nil)
		if err == nil && pl.creds.Username != "" {
			req.SetBasicAuth(pl.creds.Username, pl.creds.Password)
		}
	}
	if err != nil {
		return fmt.Errorf("the auth realm: %w", err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("the auth realm %s: %s: %s", realm.Host, resp.Status, strings.TrimSpace(string(msg)))
	}
	var tok struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&tok); err != nil {
		return fmt.Errorf("the auth realm %s: its answer: %w", realm.Host, err)
	}
	t := tok.Token
	if t == "" {
		t = tok.AccessToken
	}
	if t == "" {
		return fmt.Errorf("the auth realm %s gave no token", realm.Host)
	}
	pl.mu.Lock()
	pl.auth = "Bearer " + t
	pl.mu.Unlock()
	return nil
}

// parseChallenge splits a WWW-Authenticate value (one challenge) into
// its scheme and parameters: Bearer realm="...",service="...".
func parseChallenge(h string) (string, map[string]string) {
	params := map[string]string{}
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	rest = strings.TrimSpace(rest)
	for rest != "" {
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			break
		}
		k = strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		if strings.HasPrefix(v, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' && i+1 < len(v) {
					i++
				}
				b.WriteByte(v[i])
			}
			params[k] = b.String()
			rest = strings.TrimPrefix(strings.TrimSpace(v[min(i+1, len(v)):]), ",")
		} else {
			val, after, _ := strings.Cut(v, ",")
			params[k] = strings.TrimSpace(val)
			rest = after
		}
		rest = strings.TrimSpace(rest)
	}
	return scheme, params
}

// upstreamRepo is the registry and repository path a pull's name means:
// alpine is registry-1.docker.io's library/alpine.
func upstreamRepo(name string) (host, repo string) {
	host = RegistryHost(name)
	repo = name
	if first, rest, ok := strings.Cut(name, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		repo = rest
	}
	if host == "registry-1.docker.io" && !strings.Contains(repo, "/") {
		repo = "library/" + repo
	}
	return host, repo
}

// upstreamScheme is how the proxy speaks to a registry: plain HTTP on
// loopback (as the engine would, 127.0.0.0/8 being its default insecure
// registries), TLS with the system's roots anywhere else.
func upstreamScheme(host string) string {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	if loopbackHost(h) {
		return "http"
	}
	return "https"
}

// engineError is the engine's answer to a pull it did not start.
type engineError struct {
	status int
	body   []byte
}

func (e *engineError) Error() string {
	var m struct{ Message string }
	if json.Unmarshal(e.body, &m) == nil && m.Message != "" {
		return m.Message
	}
	return fmt.Sprintf("%d: %s", e.status, strings.TrimSpace(string(e.body)))
}

// streamedError is a pull's error the engine said in its progress,
// already passed on.
type streamedError struct{ msg string }

func (e *streamedError) Error() string { return e.msg }

// pullThrough pulls name:ref (ref a tag or a digest) through the proxy:
// the engine pulls the proxy's name for it, then the image gets the
// client's name and loses the proxy's. q is the pull's other parameters
// (platform), auth its X-Registry-Auth. Each line of the engine's
// progress goes to line (nil: none), rewritten to the client's name.
func (b *Broker) pullThrough(ctx context.Context, name, ref string, q url.Values, auth string, line func([]byte) error) error {
	addr, err := b.proxy.start()
	if err != nil {
		return err
	}
	host, repo := upstreamRepo(name)
	pl := &proxyPull{what: "pull of " + name, upstream: host, repo: repo, creds: parseRegistryAuth(auth)}
	pl.addr = host
	if _, _, err := net.SplitHostPort(host); err != nil {
		u := &url.URL{Scheme: upstreamScheme(host), Host: host}
		pl.addr = urlHostPort(u)
	}
	token, done := b.proxy.add(pl)
	defer done()
	proxyName := addr + "/" + token + "/" + repo
	rewrite := func(s []byte) []byte {
		s = []byte(strings.ReplaceAll(string(s), proxyName, name))
		return []byte(strings.ReplaceAll(string(s), token+"/", ""))
	}
	digest := strings.Contains(ref, ":")
	sep := ":"
	if digest {
		sep = "@"
	}

	out := url.Values{}
	for k, v := range q {
		out[k] = v
	}
	out.Set("fromImage", proxyName)
	out.Set("tag", ref)
	req, err := http.NewRequestWithContext(ctx, "POST", "http://docker/images/create?"+out.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := b.roundTrip(req, []byte{})
	if err != nil {
		return fmt.Errorf("the engine: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return &engineError{status: resp.StatusCode, body: rewrite(body)}
	}
	if err := engineProgress(resp.Body, "pull", rewrite, line); err != nil {
		return err
	}
	if digest {
		// The engine's API cannot name an image by a digest reference:
		// the proxy's stays, the image's one name (so it is not left
		// dangling), and the broker resolves the client's to the image's
		// id (digestref.go).
		var img struct{ Id string }
		if err := b.getJSON(ctx, "/images/"+url.PathEscape(proxyName+sep+ref)+"/json", &img); err != nil || img.Id == "" {
			return fmt.Errorf("the image pulled as %s@%s: %v", name, ref, err)
		}
		b.rememberDigest(name+sep+ref, img.Id)
		return nil
	}
	tq := url.Values{"repo": {name}, "tag": {ref}}
	if err := b.engineCall(ctx, "POST", "/images/"+url.PathEscape(proxyName+sep+ref)+"/tag?"+tq.Encode()); err != nil {
		return fmt.Errorf("naming the pulled image %s:%s: %w", name, ref, err)
	}
	// Only the proxy's name goes: the image keeps the client's.
	if err := b.engineCall(ctx, "DELETE", "/images/"+url.PathEscape(proxyName+sep+ref)+"?noprune=1"); err != nil {
		return fmt.Errorf("removing the pull proxy's name of %s:%s: %w", name, ref, err)
	}
	return nil
}

// engineCall makes a request of the engine with no body and wants 2xx.
func (b *Broker) engineCall(ctx context.Context, method, path string) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, nil)
	if err != nil {
		return err
	}
	resp, err := b.engine.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// servePull is a client's judged pull, through the proxy.
func (b *Broker) servePull(w http.ResponseWriter, r *http.Request, image string) {
	q := r.URL.Query()
	name, ref := image, q.Get("tag")
	if n, d, ok := strings.Cut(name, "@"); ok {
		name, ref = n, d
	} else if i, slash := strings.LastIndex(name, ":"), strings.LastIndex(name, "/"); i > slash {
		name, ref = name[:i], name[i+1:]
	}
	if ref == "" {
		b.refuse(w, http.StatusForbidden, refuse("pull of "+name, "a pull of every tag (--all-tags) is not made through sluice's pull proxy; name a tag"))
		return
	}
	q.Del("fromImage")
	q.Del("tag")
	b.streamProgress(w, func(line func([]byte) error) error {
		return b.pullThrough(r.Context(), name, ref, q, r.Header.Get("X-Registry-Auth"), line)
	})
}

// streamProgress answers a pull or push made through the registry proxy:
// run writes each line of the engine's progress to line, which sends the
// 200 header with the first one; an error before any line is the
// engine's status or a 502, one after is the stream's last line, in the
// engine's error form (the Docker client prints it).
func (b *Broker) streamProgress(w http.ResponseWriter, run func(line func([]byte) error) error) {
	written := false
	rc := http.NewResponseController(w)
	line := func(s []byte) error {
		if !written {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			written = true
		}
		if _, err := w.Write(s); err != nil {
			return err
		}
		_ = rc.Flush()
		return nil
	}
	err := run(line)
	var ee *engineError
	var se *streamedError
	switch {
	case err == nil, errors.As(err, &se):
	case errors.As(err, &ee) && !written:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(ee.status)
		_, _ = w.Write(ee.body)
	case !written:
		writeError(w, http.StatusBadGateway, "sluice: "+err.Error())
	default:
		msg := "sluice: " + err.Error()
		b, _ := json.Marshal(map[string]any{"errorDetail": map[string]string{"message": msg}, "error": msg})
		_ = line(append(b, '\n'))
	}
}
