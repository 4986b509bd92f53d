// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/callerns"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/sessions"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.handleStatus)
	mux.HandleFunc("POST /v1/sessions", s.handleCreate)
	mux.HandleFunc("POST /v1/sessions/adopt", s.handleAdoptPID)
	mux.HandleFunc("GET /v1/sessions", s.handleList)
	mux.HandleFunc("GET /v1/sessions/{name}", s.handleShow)
	mux.HandleFunc("DELETE /v1/sessions/{name}", s.handleKill)
	mux.HandleFunc("POST /v1/sessions/{name}/signal", s.handleSignal)
	mux.HandleFunc("GET /v1/sessions/{name}/wait", s.handleWait)
	mux.HandleFunc("GET /v1/events", s.handleEvents)
	mux.HandleFunc("GET /v1/allowlist", s.handleAllowlist)
	mux.HandleFunc("POST /v1/allowlist", s.handleAllow)
	mux.HandleFunc("POST /v1/allowlist/remove", s.handleDeny)
	mux.HandleFunc("POST /v1/allowlist/revoke", s.handleRevoke)
	mux.HandleFunc("GET /v1/prompts", s.handlePrompts)
	mux.HandleFunc("GET /v1/prompts/stream", s.handlePromptStream)
	mux.HandleFunc("POST /v1/prompts/{id}", s.handleAnswer)
	return mux
}

// guardFDs refuses a request that came with descriptors anywhere but
// where they belong (POST /v1/sessions, which checks its own): they are
// closed already (conn.Read) or now, and the connection is closed after
// the answer, so nothing a caller sends can pile up in the daemon.
func (s *Server) guardFDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := connFrom(r.Context()); err == nil && (r.Method != http.MethodPost || r.URL.Path != "/v1/sessions") {
			if n := c.dropFDs(); n > 0 {
				w.Header().Set("Connection", "close")
				writeErr(w, fail(http.StatusBadRequest, "descriptors are accepted only with POST /v1/sessions, sent with the first bytes of its connection (got %s)", fdCount(n)))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// fdCount words a number of descriptors received; conn.Read knows no
// more than that there were more than maxFDs.
func fdCount(n int) string {
	if n > maxFDs {
		return fmt.Sprintf("more than %d descriptors", maxFDs)
	}
	return fmt.Sprintf("%d descriptors", n)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	he := asHTTP(err)
	writeJSON(w, he.code, api.ErrorResponse{Error: he.msg})
}

// asHTTP is err as the API answers it: an httpError as it is, the
// session service's errors by their kind, anything else a 500.
func asHTTP(err error) *httpError {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	var se *sessions.Error
	if errors.As(err, &se) {
		code := http.StatusInternalServerError
		switch se.Kind {
		case sessions.Invalid:
			code = http.StatusBadRequest
		case sessions.Forbidden:
			code = http.StatusForbidden
		}
		return &httpError{code: code, msg: se.Msg}
	}
	return &httpError{code: http.StatusInternalServerError, msg: err.Error()}
}

// decode reads a JSON body strictly: bounded size, no unknown fields, one
// value.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, maxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fail(http.StatusRequestEntityTooLarge, "request body larger than %d bytes", maxBody)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fail(http.StatusRequestTimeout, "the request did not arrive within %v", readTimeout)
		}
		return fail(http.StatusBadRequest, "malformed request: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fail(http.StatusBadRequest, "malformed request: trailing data after the JSON object")
	}
	return nil
}

func (s *Server) peerOf(r *http.Request) (*conn, error) {
	c, err := connFrom(r.Context())
	if err != nil {
		return nil, fail(http.StatusInternalServerError, "%v", err)
	}
	return c, nil
}

func (s *Server) isAdmin(p peer) bool { return p.UID == 0 || p.in(s.adminGID, s.hasAdmGID) }

func (s *Server) mayCreate(p peer) bool { return p.UID == 0 || p.in(s.sessionGID, s.hasSessionGID) }

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Status{Version: s.cfg.Version, Sessions: len(s.snapshot()),
		Allowlist: s.cfg.AllowlistPath, Entries: s.machine.Load().Len(), DNSPath: string(s.cfg.DNS.Path)})
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	c, err := s.peerOf(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	// The descriptors came with the request's first bytes; take them now
	// so they are closed whatever happens.
	var req api.CreateRequest
	derr := decode(w, r, &req)
	fds, refused := c.takeFDs()
	if refused > 0 {
		// Late, or more than three: conn.Read closed them on arrival.
		for _, fd := range fds {
			unix.Close(fd)
		}
		fds = nil
		w.Header().Set("Connection", "close")
		if derr == nil {
			derr = fail(http.StatusBadRequest, "pass stdin, stdout and stderr with the request, with the first bytes of its connection (got %s)", fdCount(refused))
		}
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), fmt.Sprintf("client-fd-%d", i))
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if derr != nil {
		writeErr(w, derr)
		return
	}
	ss, err := s.create(c.peer, req, files)
	if err != nil {
		s.auditRefusal(c.peer, err)
		writeErr(w, err)
		return
	}
	for _, f := range files {
		f.Close()
	}
	files = nil
	s.stream(w, r, ss)
}

// create starts the session of a request: the service applies the rules
// (package sessions); the daemon says who the caller is and where its
// command starts.
func (s *Server) create(p peer, req api.CreateRequest, files []*os.File) (*session, error) {
	who, own := s.caller(p)
	c := sessions.Caller{UID: p.UID, GID: p.GID, Groups: p.Groups, Creator: who.creator, Confined: who.confined}
	if own != nil {
		c.Own = own.AsParent()
	}
	plan, err := sessions.Prepare(c, req, s.bounds(), nil, len(files))
	if err != nil {
		return nil, err
	}
	// Last of the checks: a request that is wrong anyway says so first.
	joined, err := s.callerWorld(p)
	if err != nil {
		return nil, err
	}
	// The session's file system is built from the caller's view (its
	// mount namespace, through the pidfd taken at connect, which pid reuse
	// cannot redirect), not from the daemon's, which under systemd is the
	// unit's sandbox.
	w := sessions.World{MountNamespaceOf: p.pidfd, Note: joinedNote(joined, p)}
	if joined {
		// Its resolver and proxy listen in the caller's network namespace,
		// where the command's loopback is.
		netns, err := callerns.NetNS(p.pidfd)
		if err != nil {
			return nil, fail(http.StatusForbidden, "%v", err)
		}
		defer netns.Close()
		w.Joined, w.NamespacesOf, w.NetNS = true, p.pidfd, netns
	}
	ss := &session{srv: s, pidfd: -1, stream: make(chan audit.Event, 64)}
	if _, err := s.svc.Start(plan, w, [3]*os.File{files[0], files[1], files[2]}, nil, s.hooks(ss)); err != nil {
		return nil, err
	}
	return ss, nil
}

// bounds are what bounds every session of the daemon: the machine
// allowlist as it is now, the read-only paths.
func (s *Server) bounds() sessions.Machine {
	return sessions.Machine{Policy: s.machine.Load(), ReadOnly: s.cfg.ReadOnlyPaths, SessionGroup: s.cfg.SessionGroup, LookupUser: cgroups.LookupUser,
		EngineAccess: sessions.EngineAccess}
}

// stream writes the create response: the session, its events, its exit.
// A client that goes away does not end the session.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, ss *session) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	fl, _ := w.(http.Flusher)
	info := ss.infoNow()
	_ = enc.Encode(api.StreamMessage{Session: &info})
	if fl != nil {
		fl.Flush()
	}
	for {
		select {
		case e := <-ss.stream:
			_ = enc.Encode(api.StreamMessage{Event: &e})
		case <-ss.Done():
			for {
				select {
				case e := <-ss.stream:
					_ = enc.Encode(api.StreamMessage{Event: &e})
					continue
				default:
				}
				break
			}
			code := ss.Exit()
			if code < 0 {
				// Only a re-adopted session whose supervisor left no status.
				_ = enc.Encode(api.StreamMessage{Error: fmt.Sprintf("session %s ended; its exit status is unknown (it was not recorded across the daemon restart)", ss.Info.Name)})
			} else {
				_ = enc.Encode(api.StreamMessage{Exit: &code})
			}
			if fl != nil {
				fl.Flush()
			}
			return
		case <-r.Context().Done():
			ss.mu.Lock()
			ss.stream = nil
			ss.mu.Unlock()
			return
		case <-s.stop:
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

func (s *Server) lookup(r *http.Request) (*session, peer, error) {
	c, err := s.peerOf(r)
	if err != nil {
		return nil, peer{}, err
	}
	s.mu.Lock()
	ss := s.sessions[r.PathValue("name")]
	s.mu.Unlock()
	who, _ := s.caller(c.peer)
	if ss == nil || !s.visible(who)(ss) {
		// Someone else's session does not exist, as far as p can tell.
		return nil, c.peer, fail(http.StatusNotFound, "no session %q", r.PathValue("name"))
	}
	return ss, c.peer, nil
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	c, err := s.peerOf(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := []api.SessionInfo{}
	who, _ := s.caller(c.peer)
	visible := s.visible(who)
	for _, ss := range s.snapshot() {
		if visible(ss) {
			info := ss.infoNow()
			info.Recent = nil
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b api.SessionInfo) int { return a.Created.Compare(b.Created) })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleShow(w http.ResponseWriter, r *http.Request) {
	ss, _, err := s.lookup(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ss.infoNow())
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	ss, _, err := s.lookup(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if err := ss.Enforced().Kill(); err != nil {
		writeErr(w, err)
		return
	}
	select {
	case <-ss.Done():
	case <-time.After(5 * time.Second):
	}
	writeJSON(w, http.StatusOK, map[string]string{"killed": ss.Info.Name})
}

var signals = map[string]unix.Signal{"TERM": unix.SIGTERM, "INT": unix.SIGINT, "HUP": unix.SIGHUP, "QUIT": unix.SIGQUIT,
	"KILL": unix.SIGKILL, "USR1": unix.SIGUSR1, "USR2": unix.SIGUSR2, "WINCH": unix.SIGWINCH, "CONT": unix.SIGCONT, "STOP": unix.SIGSTOP}

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request) {
	ss, _, err := s.lookup(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req api.SignalRequest
	if err := decode(w, r, &req); err != nil {
		writeErr(w, err)
		return
	}
	sig, ok := signals[strings.TrimPrefix(strings.ToUpper(req.Signal), "SIG")]
	if !ok {
		writeErr(w, fail(http.StatusBadRequest, "unknown signal %q", req.Signal))
		return
	}
	if cmd := ss.Cmd(); cmd == nil || cmd.Process == nil {
		if ss.pidfd < 0 {
			writeErr(w, fail(http.StatusConflict, "session %s was re-adopted and its first process is unknown; kill the session instead", ss.Info.Name))
			return
		}
		// Re-adopted: the supervisor, through the pidfd taken at adoption.
		if err := unix.PidfdSendSignal(ss.pidfd, sig, nil, 0); err != nil {
			writeErr(w, fail(http.StatusConflict, "signal: %v", err))
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"signalled": ss.Info.Name})
		return
	}
	if err := ss.Cmd().Process.Signal(sig); err != nil {
		writeErr(w, fail(http.StatusConflict, "signal: %v", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"signalled": ss.Info.Name})
}

// handleEvents streams events as NDJSON: root and the admin group see
// everything, others the events of their own sessions; a confined caller
// only those of its session and the sessions created from inside it.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	c, err := s.peerOf(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	who, _ := s.caller(c.peer)
	ch := s.hub.subscribe(func(e audit.Event) bool {
		if who.seesAllEvents() {
			return true
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		ss := s.sessions[e.Session]
		return ss != nil && who.sees(ss.ref(), s.lookupRef)
	})
	defer s.hub.unsubscribe(ch)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	enc := json.NewEncoder(w)
	for {
		select {
		case e := <-ch:
			_ = enc.Encode(e)
			if fl != nil {
				fl.Flush()
			}
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		}
	}
}

func (s *Server) handleAllowlist(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, json.RawMessage(s.machine.Load().Format()))
}

func (s *Server) admin(w http.ResponseWriter, r *http.Request) (peer, bool) {
	c, err := s.peerOf(r)
	if err != nil {
		writeErr(w, err)
		return peer{}, false
	}
	who, _ := s.caller(c.peer)
	if refused := who.mayChangeMachine(); refused != nil {
		uid := c.peer.UID
		s.emitRefusal(audit.Event{Type: audit.PolicyChangeRefused, Actor: &uid, PID: uint32(max(c.peer.PID, 0)), Reason: refused.Error(),
			Message: fmt.Sprintf("refused %s %s for uid %d (pid %d): %v", r.Method, r.URL.Path, c.peer.UID, c.peer.PID, refused)})
		writeErr(w, refused)
		return c.peer, false
	}
	return c.peer, true
}

func (s *Server) handleAllow(w http.ResponseWriter, r *http.Request) {
	p, ok := s.admin(w, r)
	if !ok {
		return
	}
	s.allowMu.Lock()
	defer s.allowMu.Unlock()
	req, add, err := decodeEntries(w, r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if len(add) == 0 {
		writeErr(w, fail(http.StatusBadRequest, "entries: nothing to allow"))
		return
	}
	np, err := allowlist.New(add)
	if err != nil {
		writeErr(w, fail(http.StatusBadRequest, "%v", err))
		return
	}
	merged := s.machine.Load().Merge(np)
	if err := s.writeAllowlist(merged, p.UID, "allow "+strings.Join(req.Entries, " ")); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, json.RawMessage(merged.Format()))
}

func (s *Server) handleDeny(w http.ResponseWriter, r *http.Request) {
	p, ok := s.admin(w, r)
	if !ok {
		return
	}
	s.allowMu.Lock()
	defer s.allowMu.Unlock()
	req, entries, err := decodeEntries(w, r)
	if err != nil {
		writeErr(w, err)
		return
	}
	drop := map[string]bool{}
	for _, e := range entries {
		drop[e.String()] = true
	}
	var keep []allowlist.Entry
	found := 0
	for _, e := range s.machine.Load().Entries() {
		if drop[e.String()] {
			found++
			continue
		}
		keep = append(keep, e)
	}
	if found == 0 {
		writeErr(w, fail(http.StatusNotFound, "none of %v is in the machine allowlist", req.Entries))
		return
	}
	np, err := allowlist.New(keep)
	if err == nil {
		// Entries are rebuilt; the unix socket and loopback settings stay.
		np, err = np.WithLocal(s.machine.Load().Local())
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	if err := s.writeAllowlist(np, p.UID, "deny "+strings.Join(req.Entries, " ")); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, json.RawMessage(np.Format()))
}

func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	p, ok := s.admin(w, r)
	if !ok {
		return
	}
	s.allowMu.Lock()
	defer s.allowMu.Unlock()
	var req api.RevokeRequest
	if err := decode(w, r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if req.Owner == "" {
		writeErr(w, fail(http.StatusBadRequest, "owner is required"))
		return
	}
	old := s.machine.Load()
	np, kept := old.Without(req.Owner)
	resp := api.RevokeResponse{Removed: []string{}, Kept: []string{}}
	still := map[string]bool{}
	for _, e := range np.Entries() {
		still[e.String()] = true
	}
	for _, e := range old.Entries() {
		if !still[e.String()] {
			resp.Removed = append(resp.Removed, e.String())
		}
	}
	for _, e := range kept {
		resp.Kept = append(resp.Kept, e.String())
	}
	if len(resp.Removed) == 0 && len(resp.Kept) == 0 {
		writeErr(w, fail(http.StatusNotFound, "no entry is owned by %q", req.Owner))
		return
	}
	if err := s.writeAllowlist(np, p.UID, "revoke "+req.Owner); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// decodeEntries reads an api.AllowRequest and parses its entries (with the
// request's owner), naming the first bad one.
func decodeEntries(w http.ResponseWriter, r *http.Request) (api.AllowRequest, []allowlist.Entry, error) {
	var req api.AllowRequest
	if err := decode(w, r, &req); err != nil {
		return req, nil, err
	}
	var out []allowlist.Entry
	for i, raw := range req.Entries {
		e, err := allowlist.ParseEntry(raw)
		if err != nil {
			return req, nil, fail(http.StatusBadRequest, "entries[%d] %q: %v", i, raw, err)
		}
		if req.Owner != "" {
			e.Owners = []string{req.Owner}
		}
		out = append(out, e)
	}
	return req, out, nil
}

// auditRefusal records a session the daemon refused to start for a policy
// reason (403): a confined caller asking for more than its session, a
// request beyond the machine allowlist, a caller in another namespace.
// Malformed requests (400) are the client's bug, not a decision.
func (s *Server) auditRefusal(p peer, err error) {
	he := asHTTP(err)
	if he.code != http.StatusForbidden {
		return
	}
	uid := p.UID
	s.emitRefusal(audit.Event{Type: audit.SessionRefused, Actor: &uid, PID: uint32(max(p.PID, 0)), Reason: he.msg,
		Message: fmt.Sprintf("refused a session for uid %d (pid %d): %s", p.UID, p.PID, he.msg)})
}

// emitRefusal writes an API refusal line within the daemon's refusal rate
// limit (audit.Limiter).
func (s *Server) emitRefusal(e audit.Event) {
	ok, report := s.refusals.Allow(time.Now())
	if !ok {
		return
	}
	if report > 0 {
		s.emit(audit.SuppressedEvent("", report))
	}
	s.emit(e)
}
