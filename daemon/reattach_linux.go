// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/sessions"

	"github.com/sluice-dev/sluice/exitstatus"
)

// A client whose daemon restarted comes back for its session's exit
// status (GET /v1/sessions/{name}/wait). The command may have ended while
// no daemon ran, or between the new daemon's start and the client's
// return, so ended sessions stay known for a while: endedKeep long, at
// most endedMax of them, oldest forgotten first.
const (
	endedKeep = 10 * time.Minute
	endedMax  = 1024
)

// endedSessions remembers the sessions that ended lately, for clients
// that reattach.
type endedSessions struct {
	mu    sync.Mutex
	byKey map[string]*session
	order []string
	at    map[string]time.Time
}

func (e *endedSessions) add(ss *session) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byKey == nil {
		e.byKey, e.at = map[string]*session{}, map[string]time.Time{}
	}
	now := time.Now()
	e.byKey[ss.Info.Name] = ss
	e.at[ss.Info.Name] = now
	e.order = append(e.order, ss.Info.Name)
	for len(e.order) > 0 && (len(e.order) > endedMax || now.Sub(e.at[e.order[0]]) > endedKeep) {
		delete(e.byKey, e.order[0])
		delete(e.at, e.order[0])
		e.order = e.order[1:]
	}
}

func (e *endedSessions) get(name string) *session {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ss := e.byKey[name]; ss != nil && time.Since(e.at[name]) <= endedKeep {
		return ss
	}
	return nil
}

// exitPath is where a session's supervisor leaves its command's status.
func (s *Server) exitPath(name string) string { return filepath.Join(s.stateDir(), name+".exit") }

// openExitStatus creates the session's empty status file, root's and
// mode 0600, for the supervisor to write through.
func (s *Server) openExitStatus(name string) (*os.File, error) {
	return os.OpenFile(s.exitPath(name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
}

// adoptedExit is the status a re-adopted session's supervisor left, or -1
// when there is none (the supervisor was killed, or the session predates
// supervisors).
func (s *Server) adoptedExit(name string) int {
	code, ok, err := exitstatus.Read(s.exitPath(name))
	if err != nil || !ok {
		return -1
	}
	return code
}

// handleWait streams a session to a client that lost its create stream
// (its daemon restarted): the session line, the session's events from now
// on, and its exit status, exactly as the end of a create response. A
// session that ended lately answers at once.
func (s *Server) handleWait(w http.ResponseWriter, r *http.Request) {
	c, err := s.peerOf(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	name := r.PathValue("name")
	s.mu.Lock()
	ss := s.sessions[name]
	s.mu.Unlock()
	if ss == nil {
		ss = s.ended.get(name)
	}
	who, _ := s.caller(c.peer)
	if ss == nil || !s.visible(who)(ss) {
		writeErr(w, fail(http.StatusNotFound, "no session %q", name))
		return
	}
	ss.mu.Lock()
	if ss.stream == nil {
		ss.stream = make(chan audit.Event, 64)
	}
	ss.mu.Unlock()
	s.stream(w, r, ss)
}

// endedWhileDown handles the record of a session whose command ended while
// no daemon ran (the daemon's Open reclaimed its empty cgroup): if its
// supervisor left an exit status, the session's end goes on record with
// it, and a client that reattaches gets it. It reports whether it did.
func (s *Server) endedWhileDown(r record) bool {
	code := s.adoptedExit(r.Name)
	if code < 0 {
		return false
	}
	_ = os.Remove(s.exitPath(r.Name))
	ss := &session{srv: s, Session: sessions.Ended(api.SessionInfo{Name: r.Name, UID: r.UID, Created: r.Created, Argv: []string{r.Argv0}, Audit: r.Audit, Parent: r.Parent}, code)}
	s.emit(audit.Event{Type: audit.SessionEnded, Session: r.Name, Exit: &code,
		Message: fmt.Sprintf("session %s ended while no daemon was running", r.Name)})
	s.ended.add(ss)
	return true
}

// supervisorPidfd opens a pidfd for a re-adopted session's first process,
// recorded by the daemon that started it, if that pid still names a
// process in the session's cgroup. The pidfd is taken first and checked
// alive after the cgroup is read, so a pid reused meanwhile is refused.
func supervisorPidfd(pid int, session string) (int, bool) {
	if pid <= 0 {
		return -1, false
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	inSession := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "0::") && strings.HasSuffix(line, "/"+session) {
			inSession = true
		}
	}
	if err != nil || !inSession || unix.PidfdSendSignal(fd, 0, nil, 0) != nil {
		_ = unix.Close(fd)
		return -1, false
	}
	return fd, true
}
