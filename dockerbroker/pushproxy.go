// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"bufio"
	"bytes"
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
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// A push goes through the pull proxy too, for the same reason: the engine
// pushing to the registry itself would follow, unjudged, the registry's
// auth realm and the Location of every upload, which may name another
// host (a storage front, a CDN's upload endpoint). The broker names the
// client's image 127.0.0.1:PORT/<token>/REPO:TAG, the engine pushes that
// name to the proxy, and the proxy makes every request upstream itself:
// each connection (the registry, its realm, every upload Location's
// host, any redirect) judged by the session's policy as a pull's are.
// An upstream Location is never given to the engine: it gets a path of
// the proxy's, /v2/<token>/REPO/blobs/uploads/_sluice/<id>, which the
// proxy maps back to the upstream URL. Blob parts stream through, byte
// for byte; the proxy's name is removed when the push ends, also when it
// fails.

var (
	// pushTagRE is a tag as the distribution spec writes it.
	pushTagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
	// pushDigestRE is a digest (algorithm:encoded).
	pushDigestRE = regexp.MustCompile(`^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$`)
	// uploadIDRE is an id of the proxy's upload paths.
	uploadIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

const (
	// maxUploads bounds the upload URLs one push may hold: every PATCH
	// answers a new one.
	maxUploads = 1 << 14
	// maxManifest bounds a pushed manifest, which is kept to be sent
	// again after an auth challenge (the distribution spec's 4 MiB).
	maxManifest = 4 << 20
	// uploadPath is the proxy's upload paths' prefix after the repo.
	uploadPath = "blobs/uploads/_sluice/"
)

// pushHeaders are the engine's request headers a push passes upstream;
// never its Authorization (the proxy authenticates) nor anything else.
var pushHeaders = []string{"Accept", "User-Agent", "Content-Type", "Content-Range", "Range",
	"Docker-Content-Digest", "Docker-Upload-UUID"}

// pushPassedHeaders are the upstream's response headers a push's engine
// gets besides passedHeaders; Location is rewritten (pushLocation).
var pushPassedHeaders = []string{"Range", "Docker-Upload-UUID"}

// verb is what pl is, in refusals.
func (pl *proxyPull) verb() string {
	if pl.push {
		return "push"
	}
	return "pull"
}

// pushRoute reads tail, a push's path after /v2/<token>/<repo>/: what it
// is (manifest, blob, uploads, upload) and its reference, digest or id;
// "" when it is nothing a push asks for.
func pushRoute(tail string) (kind, arg string) {
	switch {
	case strings.HasPrefix(tail, "manifests/"):
		ref := strings.TrimPrefix(tail, "manifests/")
		if pushTagRE.MatchString(ref) || pushDigestRE.MatchString(ref) {
			return "manifest", ref
		}
	case tail == "blobs/uploads/" || tail == "blobs/uploads":
		return "uploads", ""
	case strings.HasPrefix(tail, uploadPath):
		if id := strings.TrimPrefix(tail, uploadPath); uploadIDRE.MatchString(id) {
			return "upload", id
		}
	case strings.HasPrefix(tail, "blobs/"):
		if d := strings.TrimPrefix(tail, "blobs/"); pushDigestRE.MatchString(d) {
			return "blob", d
		}
	}
	return "", ""
}

// pushRequest serves the engine's request of the push pl: tail is its
// path after /v2/<token>/<repo>/. Only the distribution spec's push
// endpoints of pl's repository are served: HEAD and GET of blobs and
// manifests, an upload's start, its parts, end, status and cancel, and
// a manifest's PUT.
func (p *pullProxy) pushRequest(w http.ResponseWriter, r *http.Request, pl *proxyPull, token, tail string) {
	u := &url.URL{Scheme: upstreamScheme(pl.upstream), Host: pl.upstream, Path: "/v2/" + pl.repo + "/" + tail}
	kind, arg := pushRoute(tail)
	var methods []string
	switch kind {
	case "manifest":
		methods = []string{http.MethodGet, http.MethodHead, http.MethodPut}
	case "blob":
		methods = []string{http.MethodGet, http.MethodHead}
	case "uploads":
		// A cross-repository mount (?mount=&from=) is not passed: its
		// from is a repository of the proxy's (another pull's or push's
		// token), not one of the registry's, and the engine uploads the
		// blob when no mount is made. Only a whole upload's digest goes.
		methods = []string{http.MethodPost}
		u.Path = "/v2/" + pl.repo + "/blobs/uploads/"
		if d := r.URL.Query().Get("digest"); d != "" {
			u.RawQuery = url.Values{"digest": {d}}.Encode()
		}
	case "upload":
		methods = []string{http.MethodPatch, http.MethodPut, http.MethodGet, http.MethodDelete}
		pl.mu.Lock()
		to := pl.uploads[arg]
		pl.mu.Unlock()
		if to == nil {
			regError(w, http.StatusNotFound, "BLOB_UPLOAD_UNKNOWN", "sluice: no upload of this push by that id")
			return
		}
		c := *to
		u = &c
		// The upstream's query as it gave it (a signed URL's), then the
		// engine's digest that ends the upload.
		if d := r.URL.Query().Get("digest"); d != "" {
			add := url.Values{"digest": {d}}.Encode()
			if u.RawQuery != "" {
				u.RawQuery += "&" + add
			} else {
				u.RawQuery = add
			}
		}
	default:
		regError(w, http.StatusNotFound, "NAME_UNKNOWN", "sluice: only "+pl.repo+"'s manifests, blobs and uploads are served for this push")
		return
	}
	if !slices.Contains(methods, r.Method) {
		regError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "sluice: "+r.Method+" of a "+kind+" is not a push's")
		return
	}
	hdr := http.Header{}
	for _, k := range pushHeaders {
		if v := r.Header.Values(k); len(v) > 0 {
			hdr[k] = v
		}
	}
	var body []byte
	var stream io.Reader
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodDelete:
	case r.ContentLength == 0:
		body = []byte{}
	case kind == "manifest":
		// Small, and kept: a token expired meanwhile is asked again and
		// the manifest sent again.
		b, err := io.ReadAll(io.LimitReader(r.Body, maxManifest+1))
		if err != nil {
			regError(w, http.StatusBadRequest, "MANIFEST_INVALID", "sluice: reading the manifest: "+err.Error())
			return
		}
		if len(b) > maxManifest {
			regError(w, http.StatusRequestEntityTooLarge, "SIZE_INVALID", "sluice: a manifest larger than 4 MiB")
			return
		}
		body = b
	default:
		// A blob's part: streamed as it comes, never held whole.
		stream = r.Body
	}
	ctx := context.WithValue(r.Context(), pullKey{}, pl)
	resp, err := p.send(ctx, pl, r.Method, u, hdr, body, stream, r.ContentLength)
	if err != nil {
		p.hopFailed(w, pl, err)
		return
	}
	defer resp.Body.Close()
	loc := ""
	if l := resp.Header.Get("Location"); l != "" {
		if loc, err = p.pushLocation(pl, token, resp.Request.URL, resp.StatusCode, l); err != nil {
			p.hopFailed(w, pl, err)
			return
		}
	}
	for _, k := range append(slices.Clone(passedHeaders), pushPassedHeaders...) {
		if v := resp.Header.Values(k); len(v) > 0 {
			w.Header()[k] = v
		}
	}
	if loc != "" {
		w.Header().Set("Location", loc)
	}
	// Never WWW-Authenticate: the engine would follow its realm itself.
	w.WriteHeader(resp.StatusCode)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = io.Copy(w, resp.Body)
}

// hopFailed answers the engine for a request the proxy could not make
// upstream: a refused hop as DENIED (reported once), anything else as
// the registry's failure.
func (p *pullProxy) hopFailed(w http.ResponseWriter, pl *proxyPull, err error) {
	var he *hopError
	if errors.As(err, &he) {
		p.report(pl, he.rf)
		regError(w, http.StatusForbidden, "DENIED", he.rf.Error())
		return
	}
	regError(w, http.StatusBadGateway, "UNKNOWN", "sluice: the registry "+pl.upstream+": "+err.Error())
}

// send makes a push's request upstream. The registry's host gets the
// push's Authorization, and a challenge is answered once (with body sent
// again, when it is a kept one); any other host (an upload Location's)
// gets no credentials, as from the engine. A streamed body goes once: on
// a challenge the token is asked for the engine's next attempt, and this
// one gets the 401.
func (p *pullProxy) send(ctx context.Context, pl *proxyPull, method string, u *url.URL, hdr http.Header, body []byte, stream io.Reader, length int64) (*http.Response, error) {
	toRegistry := urlHostPort(u) == pl.addr && u.Scheme == upstreamScheme(pl.upstream)
	for attempt := 0; ; attempt++ {
		var rb io.Reader
		switch {
		case stream != nil:
			rb = stream
		case body != nil:
			rb = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, u.String(), rb)
		if err != nil {
			return nil, err
		}
		if stream != nil && length > 0 {
			req.ContentLength = length
		}
		req.Header = hdr.Clone()
		pl.mu.Lock()
		if pl.auth != "" && toRegistry {
			req.Header.Set("Authorization", pl.auth)
		}
		pl.mu.Unlock()
		resp, err := p.client.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusUnauthorized || attempt > 0 || !toRegistry {
			return resp, nil
		}
		if err := p.authorize(ctx, pl, resp.Header.Get("WWW-Authenticate")); err != nil {
			resp.Body.Close()
			return nil, err
		}
		if stream != nil {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
}

// pushLocation is the Location the engine gets for loc, which the
// upstream answered from (status): an upload's URL (any 202 or redirect,
// or a path of the repository's uploads), on whatever host, becomes a
// path of the proxy's mapped back to it, once its host is judged; a path
// of the repository's on the registry (a blob's or manifest's, after a
// PUT) becomes the proxy's path for it; anything else is dropped ("").
func (p *pullProxy) pushLocation(pl *proxyPull, token string, from *url.URL, status int, loc string) (string, error) {
	ref, err := url.Parse(loc)
	if err != nil {
		return "", fmt.Errorf("the registry's Location %q: %w", loc, err)
	}
	u := from.ResolveReference(ref)
	u.Fragment, u.RawFragment = "", ""
	prefix := "/v2/" + pl.repo + "/"
	onRegistry := urlHostPort(u) == pl.addr && u.Scheme == upstreamScheme(pl.upstream)
	if status != http.StatusAccepted && status/100 != 3 && !(onRegistry && strings.HasPrefix(u.Path, prefix+"blobs/uploads/")) {
		rest, ok := strings.CutPrefix(u.Path, prefix)
		if kind, _ := pushRoute(rest); !onRegistry || !ok || kind != "manifest" && kind != "blob" {
			return "", nil
		}
		return "/v2/" + token + "/" + pl.repo + "/" + rest, nil
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && loopbackHost(u.Hostname())) {
		return "", &hopError{rf: refuse(pl.what, "the registry %s sends the push's upload to %s, plain HTTP off loopback", pl.upstream, u.Redacted())}
	}
	if hp := urlHostPort(u); hp != pl.addr {
		if err := p.judgeHop(pl, "its upload Location", hp); err != nil {
			return "", err
		}
	}
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.uploads == nil {
		pl.uploads = map[string]*url.URL{}
	}
	if len(pl.uploads) >= maxUploads {
		return "", fmt.Errorf("more than %d upload URLs in one push", maxUploads)
	}
	pl.uploads[id] = u
	return "/v2/" + token + "/" + pl.repo + "/" + uploadPath + id, nil
}

// upstreamAddr is the host:port the proxy dials for the registry host.
func upstreamAddr(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return urlHostPort(&url.URL{Scheme: upstreamScheme(host), Host: host})
}

// engineProgress passes the engine's progress of a pull or push (JSON
// lines) to line (nil: nowhere), each rewritten; the first error the
// engine said is the result, as a streamedError.
func engineProgress(body io.Reader, verb string, rewrite func([]byte) []byte, line func([]byte) error) error {
	br := bufio.NewReaderSize(body, 64<<10)
	var failed string
	for {
		s, rerr := br.ReadBytes('\n')
		if len(s) > 0 {
			var m struct {
				Error string `json:"error"`
			}
			if json.Unmarshal(s, &m) == nil && m.Error != "" && failed == "" {
				failed = string(rewrite([]byte(m.Error)))
			}
			if line != nil {
				if err := line(rewrite(s)); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("the engine's %s: %w", verb, rerr)
		}
	}
	if failed != "" {
		return &streamedError{msg: failed}
	}
	return nil
}

// engineAsk makes a request of the engine with no body and wants 2xx;
// anything else is the engine's answer, as an engineError rewritten.
func (b *Broker) engineAsk(ctx context.Context, method, path string, rewrite func([]byte) []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, nil)
	if err != nil {
		return err
	}
	resp, err := b.engine.Do(req)
	if err != nil {
		return fmt.Errorf("the engine: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return &engineError{status: resp.StatusCode, body: rewrite(msg)}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// noAuth is the X-Registry-Auth the engine gets for a push to the
// proxy: no credentials (the proxy asks none; the client's go upstream
// from the broker only). The engine wants the header, or a body.
var noAuth = base64.URLEncoding.EncodeToString([]byte("{}"))

// pushThrough pushes name:tag through the proxy: the image gets the
// proxy's name for it, the engine pushes that, and the proxy's name goes
// again whatever the push did. q is the push's other parameters, auth
// its X-Registry-Auth. Each line of the engine's progress goes to line
// (nil: none), rewritten to the client's name.
func (b *Broker) pushThrough(ctx context.Context, name, tag string, q url.Values, auth string, line func([]byte) error) (err error) {
	addr, err := b.proxy.start()
	if err != nil {
		return err
	}
	host, repo := upstreamRepo(name)
	pl := &proxyPull{what: "push of " + name, upstream: host, repo: repo, addr: upstreamAddr(host),
		creds: parseRegistryAuth(auth), push: true}
	token, done := b.proxy.add(pl)
	defer done()
	proxyName := addr + "/" + token + "/" + repo
	rewrite := func(s []byte) []byte {
		s = []byte(strings.ReplaceAll(string(s), proxyName, name))
		return []byte(strings.ReplaceAll(string(s), token+"/", ""))
	}
	tq := url.Values{"repo": {proxyName}, "tag": {tag}}
	if err := b.engineAsk(ctx, "POST", "/images/"+url.PathEscape(name+":"+tag)+"/tag?"+tq.Encode(), rewrite); err != nil {
		return err
	}
	defer func() {
		// Only the proxy's name goes: the image keeps the client's. Also
		// when the client has gone.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rerr := b.engineCall(rctx, "DELETE", "/images/"+url.PathEscape(proxyName+":"+tag)+"?noprune=1"); rerr != nil && err == nil {
			err = fmt.Errorf("removing the push proxy's name of %s:%s: %w", name, tag, rerr)
		}
	}()
	out := url.Values{}
	for k, v := range q {
		out[k] = v
	}
	out.Set("tag", tag)
	req, err := http.NewRequestWithContext(ctx, "POST", "http://docker/images/"+url.PathEscape(proxyName)+"/push?"+out.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Registry-Auth", noAuth)
	resp, err := b.roundTrip(req, []byte{})
	if err != nil {
		return fmt.Errorf("the engine: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return &engineError{status: resp.StatusCode, body: rewrite(body)}
	}
	return engineProgress(resp.Body, "push", rewrite, line)
}

// servePush is a client's judged push, through the proxy: of one tag,
// never of every tag (--all-tags, or no tag with an old client), nor by
// digest.
func (b *Broker) servePush(w http.ResponseWriter, r *http.Request, image string) {
	q := r.URL.Query()
	name, tag := image, q.Get("tag")
	if strings.Contains(name, "@") {
		b.refuse(w, http.StatusForbidden, refuse("push of "+name, "a push by digest is not made through sluice's push proxy; name a tag"))
		return
	}
	if i, slash := strings.LastIndex(name, ":"), strings.LastIndex(name, "/"); i > slash {
		if tag == "" {
			tag = name[i+1:]
		}
		name = name[:i]
	}
	if tag == "" {
		b.refuse(w, http.StatusForbidden, refuse("push of "+name, "a push of every tag (--all-tags) is not made through sluice's push proxy; push each tag by name"))
		return
	}
	if !pushTagRE.MatchString(tag) {
		b.refuse(w, http.StatusBadRequest, refuse("push of "+name, "%q is not a tag", tag))
		return
	}
	q.Del("tag")
	b.streamProgress(w, func(line func([]byte) error) error {
		return b.pushThrough(r.Context(), name, tag, q, r.Header.Get("X-Registry-Auth"), line)
	})
}
