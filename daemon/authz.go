// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/sluice-dev/sluice/allowlist"
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

// mayCreate says why c may not create sessions (group names the session
// group), or nil.
func (c caller) mayCreate(group string) error {
	if c.uid != 0 && !c.creator {
		return fail(http.StatusForbidden, "uid %d may not create sessions: only root and members of group %q", c.uid, group)
	}
	return nil
}

// mayRunAs says why c may not run a session as user ("": c's own uid),
// or nil: only root names another user.
func (c caller) mayRunAs(user string) error {
	if user != "" && c.uid != 0 {
		return fail(http.StatusForbidden, "user: only root may run a session as another user")
	}
	return nil
}

// errNoParent is the refusal of a caller confined outside this daemon's
// sessions.
var errNoParent = fail(http.StatusForbidden, "the caller is confined by sluice outside this daemon's sessions (or its cgroup is unreadable, or the process that connected has exited): refused")

// sessionRequest applies the policy rules of a new session: what it asks
// for (nil: nothing in particular) may only narrow the machine allowlist,
// and a confined caller may only narrow its own session's policy (own; nil
// when it is confined outside this daemon's sessions). It returns what the
// session asks for from now on (nil: whatever the machine allows; a
// confined caller's session without a request asks for its parent's
// policy). The session enforces intersect(request, machine), again after
// every change of the machine allowlist.
func sessionRequest(c caller, requested, machine, own *allowlist.Policy) (*allowlist.Policy, error) {
	if requested != nil {
		if _, err := requested.Narrow(machine); err != nil {
			return nil, fail(http.StatusForbidden, "a session may only narrow the machine allowlist: %v", err)
		}
	}
	if c.confined {
		if own == nil {
			return nil, errNoParent
		}
		if requested == nil {
			requested = own
		} else if _, err := requested.Narrow(own); err != nil {
			return nil, fail(http.StatusForbidden, "a confined process may only narrow its own session's policy: %v", err)
		} else if ol := own.Local(); ol.Loopback.Strict() && requested.Local().Loopback == "" {
			// A request that does not say inherits its parent's loopback
			// mode and ports: the machine's default ("all") would let a
			// nested session out of its parent's "session" mode.
			l := requested.Local()
			l.Loopback, l.LoopbackPorts = ol.Loopback, ol.LoopbackPorts
			var err error
			if requested, err = requested.WithLocal(l); err != nil {
				return nil, fail(http.StatusBadRequest, "%v", err)
			}
		}
	}
	return requested, nil
}

// envSocketBounds is the rule for the built-in unix sockets that a new
// session's environment chooses ($SSH_AUTH_SOCK, $GNUPGHOME's sockets:
// enforcer.EnvUnixSockets). An unconfined caller's environment is its
// user's own choice: no bound (nil). A confined caller's is not (a
// confined step could set SSH_AUTH_SOCK=/var/run/docker.sock): its new
// session gets at most what the caller's own session was given (own), for
// each name the same path or nothing, never a new one.
func envSocketBounds(c caller, own []string) *[]string {
	if !c.confined {
		return nil
	}
	b := slices.Clone(own)
	if b == nil {
		b = []string{}
	}
	return &b
}

// intersect is the part of requested that the machine allows; nil
// requested means "everything the machine allows". It is applied again to
// every session when the machine allowlist changes. The local part (unix
// sockets, loopback) is requested's within the machine's.
func intersect(requested, machine *allowlist.Policy) *allowlist.Policy {
	if requested == nil {
		return machine
	}
	var keep []allowlist.Entry
	for _, e := range requested.Entries() {
		one, err := allowlist.New([]allowlist.Entry{e})
		if err == nil {
			// Judge the entry alone: its local part is the machine's.
			one, err = one.WithLocal(machine.Local())
		}
		if err != nil {
			continue
		}
		if _, err := one.Narrow(machine); err == nil {
			keep = append(keep, e)
		}
	}
	p, err := allowlist.New(keep)
	if err != nil {
		p, _ = allowlist.New(nil)
	}
	if wl, err := p.WithLocal(requested.Local().Within(machine.Local())); err == nil {
		p = wl
	}
	return p
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
