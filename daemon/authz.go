// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"net/http"
)

// The API's authorization rules, kept free of the kernel (no /proc, no
// cgroups, no datapath) so that they are unit-tested on any machine. The
// handlers find out who the caller is (peer credentials, its cgroup) and
// ask these rules what it may do.

// caller is an API caller as the rules see it.
type caller struct {
	uid      uint32
	admin    bool // root, or a member of the admin group
	creator  bool // root, or a member of the session group
	confined bool // its process runs under sluice (or its cgroup could not be read)
	// session is the daemon session the caller runs in; "" when it is
	// not confined, or confined outside this daemon's sessions.
	session string
}

// sessionRef is a session as the rules see it.
type sessionRef struct {
	name, parent string
	uid          uint32
}

// maxNesting bounds the walk up a session's parents, in case a record
// was edited into a cycle.
const maxNesting = 64

// sees reports whether c may see and act on (show, list, kill, signal,
// stream the events of) ss: its own uid's sessions (root owns all), and
// for a confined caller only its own session and those created from inside
// it, at any depth, so an agent cannot watch, signal or kill its user's
// other sessions. A caller confined outside this daemon's sessions sees
// none. lookup finds a session by name (for the parents).
func (c caller) sees(ss sessionRef, lookup func(name string) (sessionRef, bool)) bool {
	if c.uid != 0 && ss.uid != c.uid {
		return false
	}
	if !c.confined {
		return true
	}
	if c.session == "" {
		return false
	}
	for range maxNesting {
		if ss.name == c.session {
			return true
		}
		next, ok := lookup(ss.parent)
		if ss.parent == "" || !ok {
			return false
		}
		ss = next
	}
	return false
}

// seesAllEvents reports whether c gets every event of the daemon,
// including those of no session (policy changes, refusals): unconfined
// root and admin-group members. Everyone else gets the events of the
// sessions it sees.
func (c caller) seesAllEvents() bool { return !c.confined && (c.uid == 0 || c.admin) }

// mayChangeMachine says why c may not change the machine allowlist, or
// nil: it needs root or the admin group, and never from inside a session
// (an agent must not open hosts for itself, whatever its user may do).
func (c caller) mayChangeMachine() error {
	if c.uid != 0 && !c.admin {
		return fail(http.StatusForbidden, "changing the machine allowlist needs root or the admin group")
	}
	if c.confined {
		return fail(http.StatusForbidden, "the machine allowlist cannot be changed from inside a sluice session")
	}
	return nil
}

// httpError is an API error with its status.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &httpError{code: code, msg: fmt.Sprintf(format, args...)}
}

// mayAnswer says why c may not see or answer the prompts of ss, or nil:
// never from inside any session (an agent must not approve its own
// questions, nor those of another session), and only for a session the
// caller owns (root: all). An "always" approval writes the machine
// allowlist, so it also needs mayChangeMachine.
func (c caller) mayAnswer(ss sessionRef, always bool) error {
	if c.confined {
		return fail(http.StatusForbidden, "prompts cannot be answered from inside a sluice session")
	}
	if c.uid != 0 && ss.uid != c.uid {
		return fail(http.StatusForbidden, "the prompt belongs to another user's session")
	}
	if always {
		if err := c.mayChangeMachine(); err != nil {
			return fail(http.StatusForbidden, "--always writes the machine allowlist: %v", err)
		}
	}
	return nil
}
