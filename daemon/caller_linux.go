package daemon

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/cgroups"
)

// callerSession says whether the peer process is itself confined by
// sluice, and in which of the daemon's sessions. The API socket is a unix
// socket, which the datapath does not filter: without this check a confined
// agent could ask the daemon for a new session with the whole machine
// allowlist. A peer whose cgroup cannot be read (another pid namespace),
// or that is gone (its pid may belong to another process now), is
// treated as confined: fail closed.
func (s *Server) callerSession(p peer) (confined bool, ss *session) {
	if p.PID <= 0 {
		return true, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.PID))
	if err != nil || !p.alive() {
		return true, nil
	}
	mount, err := cgroups.Mount()
	if err != nil {
		return true, nil
	}
	rel, err := filepath.Rel(mount, s.e.Root().Path())
	if err != nil {
		return true, nil
	}
	root := "/" + rel + "/"
	for _, line := range strings.Split(string(b), "\n") {
		path, ok := strings.CutPrefix(line, "0::")
		if !ok {
			continue
		}
		rest, inside := strings.CutPrefix(path+"/", root)
		if !inside {
			return false, nil
		}
		name, _, _ := strings.Cut(rest, "/")
		s.mu.Lock()
		ss = s.sessions[name]
		s.mu.Unlock()
		return true, ss
	}
	return false, nil
}

// narrowForCaller applies the nested-session rule: a confined caller may
// create a session only within its own session's policy. It also returns
// the caller's session, the new session's parent ("" for none).
func (s *Server) narrowForCaller(p peer, requested *allowlist.Policy) (*allowlist.Policy, string, error) {
	confined, parent := s.callerSession(p)
	if !confined {
		return requested, "", nil
	}
	if parent == nil {
		return nil, "", fail(http.StatusForbidden, "the caller is confined by sluice outside this daemon's sessions (or its cgroup is unreadable, or the process that connected has exited): refused")
	}
	own := parent.s.Policy()
	if requested == nil {
		return own, parent.info.Name, nil
	}
	if _, err := requested.Narrow(own); err != nil {
		return nil, "", fail(http.StatusForbidden, "a confined process may only narrow its own session's policy: %v", err)
	}
	return requested, parent.info.Name, nil
}

// scope is what a caller may see and act on among sessions it owns (by
// uid): an unconfined caller sees them all; a confined one only its own
// session and the sessions created from inside it, at any depth, so an
// agent cannot watch, signal or kill its user's other sessions. A caller
// confined outside this daemon's sessions sees none.
func (s *Server) scope(p peer) func(*session) bool {
	confined, own := s.callerSession(p)
	if !confined {
		return func(*session) bool { return true }
	}
	if own == nil {
		return func(*session) bool { return false }
	}
	root := own.info.Name
	return func(ss *session) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		// Parents are recorded at creation and never change; the walk
		// is bounded in case a record was edited into a cycle.
		for range 64 {
			if ss.info.Name == root {
				return true
			}
			if ss = s.sessions[ss.info.Parent]; ss == nil {
				return false
			}
		}
		return false
	}
}
