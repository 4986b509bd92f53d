// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config is one session's broker.
type Config struct {
	// Scope is what the session's containers may have (Owns is the
	// broker's own).
	Scope Scope
	// Engine is the path of the real engine's socket.
	Engine string
	// AllowRegistry judges the registry host of a pull or push (host or
	// host:port) by the session's policy: nil when it allows it, else
	// why not (the refusal's reason). nil: every registry is refused.
	AllowRegistry func(host string) error
	// AllowFetch judges host:port of a URL the engine fetches for a
	// build (ADD), as AllowRegistry a registry. nil: every one refused.
	AllowFetch func(hostport string) error
	// OnRefuse is told of every refusal (the session's line and audit
	// event).
	OnRefuse func(*Refusal)
	// OnStart runs once the engine says a container of the session
	// started, before the client hears it: the session service attaches
	// the container's cgroup with the session's policy. On an error the
	// container is removed (it must not run outside the session's
	// policy) and the client is told why.
	OnStart func(id string) error
	// OnBuild runs before a build goes to the engine: it makes the
	// cgroup parent the build's step containers get, whose cgroups the
	// datapath judges as the session's from their first instruction (for
	// --network container:<id>, as that container's session, whose
	// resolver and proxy listen in the namespace the steps share; id is
	// the full id, "" for any other network). done runs once the build
	// has ended. nil: builds are refused.
	OnBuild func(container string) (parent string, done func(), err error)
	// SpoolDir is where a build's context is kept while it is judged
	// ("": the system's temporary directory); MaxContext bounds it
	// (0: DefaultMaxContext).
	SpoolDir   string
	MaxContext int64
}

// Broker serves one session's Docker API socket.
type Broker struct {
	cfg    Config
	srv    *http.Server
	engine *http.Client

	mu    sync.Mutex
	owned map[string]bool // full container ids the session created
	execs map[string]bool // exec ids made in them
	// networks and volumes are the session's own: network ids and
	// volume names the engine made through this broker.
	networks map[string]bool
	volumes  map[string]bool
	conns    map[net.Conn]struct{}
	closed   bool

	// images is held by builds (read) and pulls (write): no pull of the
	// session's changes an image between a build's judging and its end.
	images sync.RWMutex
	// proxy is the session's pull-through registry (pullproxy.go).
	proxy *pullProxy
	// adds is the session's fetch proxy for builds' ADD URLs
	// (addproxy.go).
	adds *addProxy
	// digests maps the digest references the session pulled through the
	// proxy (digestKey) to the pulled image's id: the engine's API cannot
	// give an image a digest reference, so the broker resolves them.
	digests map[string]string
}

// New is a broker for cfg; Serve starts it.
func New(cfg Config) *Broker {
	b := &Broker{cfg: cfg, owned: map[string]bool{}, execs: map[string]bool{}, conns: map[net.Conn]struct{}{},
		networks: map[string]bool{}, volumes: map[string]bool{}, digests: map[string]string{}}
	b.proxy = newPullProxy(b)
	b.adds = newAddProxy(b)
	b.engine = &http.Client{Transport: &http.Transport{DialContext: b.dialEngine, DisableKeepAlives: true}, Timeout: 30 * time.Second}
	b.srv = &http.Server{Handler: http.HandlerFunc(b.serveHTTP), ReadHeaderTimeout: 30 * time.Second}
	b.cfg.Scope.Owns = func(ref string) bool { _, ok := b.resolveOwn(context.Background(), ref); return ok }
	b.cfg.Scope.OwnsNetwork = func(ref string) bool { _, ok := b.resolveNetwork(context.Background(), ref); return ok }
	b.cfg.Scope.OwnsVolume = func(name string) bool { return b.ownsVolume(context.Background(), name) }
	return b
}

// Serve serves the session's requests on l until Close.
func (b *Broker) Serve(l net.Listener) error {
	err := b.srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving and cuts every connection the broker holds, both
// ways: upgraded ones (attach, exec) and streamed responses (logs -f,
// wait) end at once.
func (b *Broker) Close() error {
	err := b.srv.Close()
	b.proxy.close()
	b.adds.close()
	b.mu.Lock()
	b.closed = true
	conns := b.conns
	b.conns = map[net.Conn]struct{}{}
	b.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	return err
}

// Containers are the ids of the containers the session created.
func (b *Broker) Containers() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for id := range b.owned {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// RemoveAll force-removes the session's containers (and their anonymous
// volumes) from the engine, then its networks and named volumes; ones
// already gone are not errors.
func (b *Broker) RemoveAll(ctx context.Context) error {
	var errs []error
	for _, id := range b.Containers() {
		errs = append(errs, b.remove(ctx, id))
	}
	errs = append(errs, b.removeNetVol(ctx))
	return errors.Join(errs...)
}

// remove force-removes the container id with its anonymous volumes; one
// already gone is not an error.
func (b *Broker) remove(ctx context.Context, id string) error {
	req, _ := http.NewRequestWithContext(ctx, "DELETE", "http://docker/containers/"+id+"?force=1&v=1", nil)
	resp, err := b.engine.Do(req)
	if err != nil {
		return fmt.Errorf("remove container %.12s: %w", id, err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("remove container %.12s: %s: %s", id, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

func (b *Broker) dialEngine(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", b.cfg.Engine)
}

// track keeps c to be cut by Close; false when the broker is closed (c
// is closed then).
func (b *Broker) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		_ = c.Close()
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *Broker) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	_ = c.Close()
}

// refuse answers r with the engine's error form and reports it.
func (b *Broker) refuse(w http.ResponseWriter, status int, rf *Refusal) {
	if b.cfg.OnRefuse != nil {
		b.cfg.OnRefuse(rf)
	}
	writeError(w, status, rf.Error())
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func (b *Broker) serveHTTP(w http.ResponseWriter, r *http.Request) {
	ep, ref := Route(r.Method, r.URL.Path)
	what := r.Method + " " + versionPrefix.ReplaceAllString(r.URL.Path, "/")
	switch ep {
	case Pass:
		b.forward(w, r, nil, nil)
	case Images:
		// An image pulled by digest through the proxy is inspected by
		// its id: the engine knows it by no such reference.
		if id, ok := b.pulledDigest(ref); ok {
			r.URL.Path = strings.TrimSuffix(versionPrefix.FindString(r.URL.Path), "/") + "/images/" + id + "/json"
			r.URL.RawPath = ""
		}
		b.forward(w, r, nil, nil)
	case Create:
		b.create(w, r)
	case List:
		b.list(w, r)
	case Own:
		id, ok := b.resolveOwn(r.Context(), ref)
		if !ok {
			b.refuse(w, http.StatusForbidden, refuse(what, "%s is not a container of this session", ref))
			return
		}
		action := ""
		if _, a, ok := strings.Cut(strings.TrimPrefix(versionPrefix.ReplaceAllString(r.URL.Path, "/"), "/containers/"), "/"); ok {
			action = a
		}
		r.URL.Path = versionPrefix.FindString(r.URL.Path) + "containers/" + id
		if action != "" {
			r.URL.Path += "/" + action
		}
		if !strings.HasPrefix(r.URL.Path, "/") {
			r.URL.Path = "/" + r.URL.Path
		}
		var fwd []byte // nil: the client's body, streamed
		if r.Method == "POST" && action == "start" {
			// API versions before 1.24 took a HostConfig with the start,
			// applied unjudged: a start carries nothing.
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if t := strings.TrimSpace(string(body)); err != nil || t != "" && t != "{}" && t != "null" {
				b.refuse(w, http.StatusForbidden, refuse(what, "a start with a body: its HostConfig would not be judged"))
				return
			}
			fwd = []byte{}
		}
		var after func(*http.Response) error
		if r.Method == "POST" && (action == "start" || action == "restart") && b.cfg.OnStart != nil {
			after = func(resp *http.Response) error {
				if resp.StatusCode/100 != 2 {
					return nil
				}
				if err := b.cfg.OnStart(id); err != nil {
					// Not confined by the session's policy: it does not
					// run at all.
					if rerr := b.remove(context.Background(), id); rerr != nil {
						return fmt.Errorf("%w; and it could not be removed: %v", err, rerr)
					}
					return fmt.Errorf("%w; the container was removed", err)
				}
				return nil
			}
		}
		b.forward(w, r, fwd, after)
	case OwnExec:
		if _, ok := b.resolveOwn(r.Context(), ref); !ok {
			b.refuse(w, http.StatusForbidden, refuse("exec", "%s is not a container of this session", ref))
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			writeError(w, http.StatusBadRequest, "sluice: "+err.Error())
			return
		}
		if rf := JudgeExec(body); rf != nil {
			b.refuse(w, http.StatusForbidden, rf)
			return
		}
		b.forwardCreated(w, r, body, b.execs)
	case ExecOwn:
		b.mu.Lock()
		ok := b.execs[ref]
		b.mu.Unlock()
		if !ok {
			b.refuse(w, http.StatusForbidden, refuse("exec", "%s is not an exec of this session's containers", ref))
			return
		}
		b.forward(w, r, nil, nil)
	case Pull:
		q := r.URL.Query()
		if q.Get("fromSrc") != "" {
			b.refuse(w, http.StatusForbidden, refuse("image import", "importing images is not judged yet"))
			return
		}
		b.registry(w, r, "pull", q.Get("fromImage"))
	case Push:
		name, err := url.PathUnescape(ref)
		if err != nil {
			name = ref
		}
		b.registry(w, r, "push", name)
	case NetCreate:
		b.networkCreate(w, r)
	case VolCreate:
		b.volumeCreate(w, r)
	case NetList, VolList:
		b.list(w, r)
	case NetOwn:
		id, ok := b.resolveNetwork(r.Context(), ref)
		if !ok {
			if b.notFound(w, r, "network", ref, "/networks/"+url.PathEscape(ref)) {
				return
			}
			b.refuse(w, http.StatusForbidden, refuse(what, "%s is not a network of this session", ref))
			return
		}
		r.URL.Path = versionPrefix.FindString(r.URL.Path) + "networks/" + id
		if !strings.HasPrefix(r.URL.Path, "/") {
			r.URL.Path = "/" + r.URL.Path
		}
		b.forward(w, r, nil, nil)
	case NetConnect:
		b.networkConnect(w, r, ref)
	case VolOwn:
		if !b.ownsVolume(r.Context(), ref) {
			if b.notFound(w, r, "volume", ref, "/volumes/"+url.PathEscape(ref)) {
				return
			}
			b.refuse(w, http.StatusForbidden, refuse(what, "%s is not a volume of this session", ref))
			return
		}
		b.forward(w, r, nil, nil)
	case Build:
		b.build(w, r)
	default:
		b.refuse(w, http.StatusForbidden, refuse(what, "not an endpoint sluice judges (containers, networks and volumes of the session, pulls, pushes, /_ping, /version, /info)"))
	}
}

// registry judges a pull or push by the registry host the image names.
func (b *Broker) registry(w http.ResponseWriter, r *http.Request, verb, image string) {
	if image == "" {
		b.refuse(w, http.StatusBadRequest, refuse(verb, "no image named"))
		return
	}
	host := RegistryHost(image)
	if b.cfg.AllowRegistry == nil {
		b.refuse(w, http.StatusForbidden, refuse(verb+" of "+image, "the registry %s is not in the session's allowlist", host))
		return
	}
	if err := b.cfg.AllowRegistry(host); err != nil {
		b.refuse(w, http.StatusForbidden, refuse(verb+" of "+image, "%v", err))
		return
	}
	if verb == "pull" {
		// Waits for the session's builds: see Broker.images.
		b.images.Lock()
		defer b.images.Unlock()
		b.servePull(w, r, image)
		return
	}
	// A push goes through the proxy too (pushproxy.go), every hop
	// judged. It reads the image, as a build does: no pull of the
	// session's renames it meanwhile.
	b.images.RLock()
	defer b.images.RUnlock()
	b.servePush(w, r, image)
}

// create judges a container's create request and remembers the
// container the engine made.
func (b *Broker) create(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "sluice: "+err.Error())
		return
	}
	out, rf := JudgeCreate(body, b.cfg.Scope)
	if rf != nil {
		b.refuse(w, http.StatusForbidden, rf)
		return
	}
	if out, err = b.createImage(out); err != nil {
		writeError(w, http.StatusBadRequest, "sluice: "+err.Error())
		return
	}
	b.forwardCreated(w, r, out, b.owned)
}

// forwardCreated sends r with body and records the Id of what the engine
// created in set.
func (b *Broker) forwardCreated(w http.ResponseWriter, r *http.Request, body []byte, set map[string]bool) {
	b.forwardRecorded(w, r, body, func(out []byte) {
		var c struct{ Id string }
		if json.Unmarshal(out, &c) == nil && c.Id != "" {
			b.mu.Lock()
			set[c.Id] = true
			b.mu.Unlock()
		}
	})
}

// forwardRecorded sends r with body and hands a successful answer to
// record before the client gets it.
func (b *Broker) forwardRecorded(w http.ResponseWriter, r *http.Request, body []byte, record func([]byte)) {
	resp, err := b.roundTrip(r, body)
	if err != nil {
		writeError(w, http.StatusBadGateway, "sluice: the engine: "+err.Error())
		return
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		writeError(w, http.StatusBadGateway, "sluice: the engine: "+err.Error())
		return
	}
	if resp.StatusCode/100 == 2 {
		record(out)
	}
	copyHeader(w.Header(), resp.Header)
	w.Header().Del("Content-Length")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

// list answers GET /containers/json, /networks and /volumes with the
// session's own only: the engine filters by the session's label.
func (b *Broker) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filters := map[string][]string{}
	if f := q.Get("filters"); f != "" {
		// Both forms the engine reads: {"label":["a"]} and {"label":{"a":true}}.
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(f), &raw); err != nil {
			writeError(w, http.StatusBadRequest, "sluice: filters: "+err.Error())
			return
		}
		for k, v := range raw {
			var list []string
			var set map[string]bool
			if json.Unmarshal(v, &list) == nil {
				filters[k] = list
			} else if json.Unmarshal(v, &set) == nil {
				for s := range set {
					filters[k] = append(filters[k], s)
				}
			}
		}
	}
	filters["label"] = append(filters["label"], SessionLabel+"="+b.cfg.Scope.Session)
	f, _ := json.Marshal(filters)
	q.Set("filters", string(f))
	r.URL.RawQuery = q.Encode()
	b.forward(w, r, nil, nil)
}

// resolveOwn resolves ref (id, short id, name) through the engine and
// reports whether it is one of the session's containers: created by this
// broker and labelled as the session's.
func (b *Broker) resolveOwn(ctx context.Context, ref string) (string, bool) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://docker/containers/"+url.PathEscape(ref)+"/json", nil)
	if err != nil {
		return "", false
	}
	resp, err := b.engine.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var c struct {
		Id     string
		Config struct{ Labels map[string]string }
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&c) != nil {
		return "", false
	}
	b.mu.Lock()
	owned := b.owned[c.Id]
	b.mu.Unlock()
	return c.Id, owned && c.Config.Labels[SessionLabel] == b.cfg.Scope.Session
}

// roundTrip sends r to the engine on a connection of its own (body
// replacing r's when not nil) and returns the response, whose body reads
// from that connection; the connection is tracked until the body is
// closed.
func (b *Broker) roundTrip(r *http.Request, body []byte) (*http.Response, error) {
	c, err := b.dialEngine(r.Context(), "", "")
	if err != nil {
		return nil, err
	}
	if !b.track(c) {
		return nil, errors.New("the session's broker is closed")
	}
	out := r.Clone(context.Background())
	out.RequestURI = ""
	out.Host = "docker"
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		if len(body) == 0 {
			// A body of unknown length goes out chunked, which the
			// engine takes for a body (a start refuses one): none.
			out.Body = http.NoBody
		}
		out.ContentLength = int64(len(body))
		out.TransferEncoding = nil
		out.Header.Del("Content-Length")
	} else {
		out.Body = r.Body
	}
	if err := out.Write(c); err != nil {
		b.untrack(c)
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, out)
	if err != nil {
		b.untrack(c)
		return nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The bytes after the answer's header are the stream: what br
		// buffered, then the connection.
		resp.Body = &upgraded{Reader: br, conn: c, done: func() { b.untrack(c) }}
		return resp, nil
	}
	resp.Body = &connBody{ReadCloser: resp.Body, done: func() { b.untrack(c) }}
	return resp, nil
}

// forward sends r to the engine and streams the answer back; after runs
// once the engine has answered, before the client hears it (an error
// there is the client's answer). An upgraded answer (attach, exec start)
// splices the two connections until either side ends.
func (b *Broker) forward(w http.ResponseWriter, r *http.Request, body []byte, after func(*http.Response) error) {
	resp, err := b.roundTrip(r, body)
	if err != nil {
		writeError(w, http.StatusBadGateway, "sluice: the engine: "+err.Error())
		return
	}
	defer resp.Body.Close()
	if after != nil {
		if err := after(resp); err != nil {
			writeError(w, http.StatusInternalServerError, "sluice: "+err.Error())
			return
		}
	}
	if up, ok := resp.Body.(*upgraded); ok {
		b.splice(w, resp, up)
		return
	}
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	// The header goes out at once: a client waits for it before going on
	// (docker run waits for its wait request's answer before the start).
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// splice hands an upgraded connection to the client: the engine's answer
// is written on the hijacked client connection, then bytes flow both
// ways; the client's half-close is passed on, and the engine's end (or
// Close) ends both.
func (b *Broker) splice(w http.ResponseWriter, resp *http.Response, up *upgraded) {
	cc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "sluice: "+err.Error())
		return
	}
	if !b.track(cc) {
		return
	}
	defer b.untrack(cc)
	head := resp.Header.Clone()
	_, _ = fmt.Fprintf(brw, "HTTP/1.1 %s\r\n", resp.Status)
	_ = head.Write(brw)
	_, _ = brw.WriteString("\r\n")
	if err := brw.Flush(); err != nil {
		return
	}
	go func() {
		// The client's input: what it already sent, then its connection.
		_, _ = io.Copy(up.conn, brw.Reader)
		if cw, ok := up.conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
	_, _ = io.Copy(cc, up.Reader)
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = slices.Clone(v)
	}
}

// connBody is a response body whose connection is let go with it.
type connBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (c *connBody) Close() error {
	err := c.ReadCloser.Close()
	c.once.Do(c.done)
	return err
}

// upgraded is the engine's side of an upgraded connection: what it sent
// after its answer (buffered), then the connection.
type upgraded struct {
	io.Reader
	conn net.Conn
	once sync.Once
	done func()
}

func (u *upgraded) Close() error {
	u.once.Do(u.done)
	return nil
}
