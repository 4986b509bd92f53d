// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

// caller is p as the rules in authz.go see it, and the daemon session it
// runs in (nil: none of this daemon's).
func (s *Server) caller(p peer) (caller, *session) {
	confined, own := s.callerSession(p)
	c := caller{uid: p.UID, admin: s.isAdmin(p), creator: s.mayCreate(p), confined: confined}
	if own != nil {
		c.session = own.Info.Name
	}
	return c, own
}

// visible is the rule "c sees ss" (caller.sees) over the daemon's
// sessions; it takes s.mu for the walk up the parents.
func (s *Server) visible(c caller) func(*session) bool {
	return func(ss *session) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return c.sees(ss.ref(), s.lookupRef)
	}
}

// lookupRef finds a session by name for the rules; s.mu is held.
func (s *Server) lookupRef(name string) (sessionRef, bool) {
	ss := s.sessions[name]
	if ss == nil {
		return sessionRef{}, false
	}
	return ss.ref(), true
}

// ref is ss as the rules see it.
func (ss *session) ref() sessionRef {
	return sessionRef{name: ss.Info.Name, parent: ss.Info.Parent, uid: ss.Info.UID}
}
