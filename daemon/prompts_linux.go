// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/user"
	"strconv"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/prompts"
)

// Ask mode's API (docs/ask.md): GET /v1/prompts lists the pending
// prompts the caller may answer, GET /v1/prompts/stream follows them, and
// POST /v1/prompts/{id} answers one. The rules are caller.mayAnswer:
// never from inside a session.

// promptViewer is the caller of a prompts request, refused (403, and a
// policy_change_refused line for an attempt to answer) when it may not
// see prompts at all.
func (s *Server) promptViewer(w http.ResponseWriter, r *http.Request) (caller, peer, bool) {
	c, err := s.peerOf(r)
	if err != nil {
		writeErr(w, err)
		return caller{}, peer{}, false
	}
	who, _ := s.caller(c.peer)
	if who.confined {
		err := fail(http.StatusForbidden, "prompts cannot be seen or answered from inside a sluice session")
		if r.Method == http.MethodPost {
			s.refusePrompt(c.peer, r, err)
		}
		writeErr(w, err)
		return who, c.peer, false
	}
	return who, c.peer, true
}

// refusePrompt records a refused answer: an agent trying to approve its
// own question is what an auditor most wants to see.
func (s *Server) refusePrompt(p peer, r *http.Request, refused error) {
	uid := p.UID
	s.emitRefusal(audit.Event{Type: audit.PolicyChangeRefused, Actor: &uid, PID: uint32(max(p.PID, 0)), Reason: refused.Error(),
		Message: fmt.Sprintf("refused %s %s for uid %d (pid %d): %v", r.Method, r.URL.Path, p.UID, p.PID, refused)})
}

// promptVisible: who may answer p's session's prompts (short of always).
func (s *Server) promptVisible(who caller, p prompts.Prompt) bool {
	s.mu.Lock()
	ss := s.sessions[p.Session]
	s.mu.Unlock()
	return ss != nil && who.mayAnswer(ss.ref(), false) == nil
}

func (s *Server) handlePrompts(w http.ResponseWriter, r *http.Request) {
	who, _, ok := s.promptViewer(w, r)
	if !ok {
		return
	}
	out := []prompts.Prompt{}
	for _, p := range s.prompts.List() {
		if s.promptVisible(who, p) {
			out = append(out, p)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// handlePromptStream writes the pending prompts, then every prompt raised
// or settled, one JSON object a line, until the client goes.
func (s *Server) handlePromptStream(w http.ResponseWriter, r *http.Request) {
	who, _, ok := s.promptViewer(w, r)
	if !ok {
		return
	}
	ch, cancel := s.prompts.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	for _, p := range s.prompts.List() {
		if s.promptVisible(who, p) {
			_ = enc.Encode(p)
		}
	}
	if fl != nil {
		fl.Flush()
	}
	for {
		select {
		case p, open := <-ch:
			if !open {
				return // fell behind: the client reconnects and lists again
			}
			if !s.promptVisible(who, p) {
				continue
			}
			_ = enc.Encode(p)
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

func (s *Server) handleAnswer(w http.ResponseWriter, r *http.Request) {
	who, p, ok := s.promptViewer(w, r)
	if !ok {
		return
	}
	var req api.PromptAnswer
	if err := decode(w, r, &req); err != nil {
		writeErr(w, err)
		return
	}
	var a prompts.Answer
	switch req.Decision {
	case "approve":
		sc, err := prompts.ParseScope(req.Scope)
		if err != nil {
			writeErr(w, fail(http.StatusBadRequest, "%v", err))
			return
		}
		a = prompts.Answer{Allow: true, Scope: sc}
	case "deny":
		if req.Scope != "" {
			writeErr(w, fail(http.StatusBadRequest, "a denial has no scope"))
			return
		}
	default:
		writeErr(w, fail(http.StatusBadRequest, "decision %q: want approve or deny", req.Decision))
		return
	}
	a.By = userName(p.UID)
	id := r.PathValue("id")
	pr, found := s.prompts.Get(id)
	s.mu.Lock()
	var ss *session
	if found {
		ss = s.sessions[pr.Session]
	}
	s.mu.Unlock()
	if ss == nil {
		writeErr(w, fail(http.StatusNotFound, "no pending prompt %q", id))
		return
	}
	if err := who.mayAnswer(ss.ref(), a.Scope == prompts.Always); err != nil {
		s.refusePrompt(p, r, err)
		writeErr(w, err)
		return
	}
	if a.Scope == prompts.Always {
		if err := s.allowAlways(pr, a.By, p.UID); err != nil {
			writeErr(w, err)
			return
		}
	}
	settled, err := s.prompts.Answer(id, a)
	if errors.Is(err, prompts.ErrNoPrompt) {
		writeErr(w, fail(http.StatusNotFound, "%v", err))
		return
	}
	if err != nil {
		writeErr(w, fail(http.StatusConflict, "%v", err))
		return
	}
	writeJSON(w, http.StatusOK, settled)
}

// allowAlways writes the prompt's name (or address) to the machine
// allowlist, owned by owner.
func (s *Server) allowAlways(p prompts.Prompt, owner string, actor uint32) error {
	s.allowMu.Lock()
	defer s.allowMu.Unlock()
	e, err := allowlist.ParseEntry(p.Name)
	if err != nil {
		return fail(http.StatusBadRequest, "prompt %s: %q: %v", p.ID, p.Name, err)
	}
	e.Owners = []string{owner}
	np, err := allowlist.New([]allowlist.Entry{e})
	if err != nil {
		return fail(http.StatusBadRequest, "%v", err)
	}
	merged := s.machine.Load().Merge(np)
	return s.writeAllowlist(merged, actor, fmt.Sprintf("allow %s (always, prompt %s of session %s)", p.Name, p.ID, p.Session))
}

// userName is "user:NAME" for uid, "uid:N" when it has no name.
func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil && u.Username != "" {
		return "user:" + u.Username
	}
	return "uid:" + strconv.FormatUint(uint64(uid), 10)
}
