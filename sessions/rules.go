// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"slices"

	"github.com/sluice-dev/sluice/allowlist"
)

// The rules of a new session, kept free of the kernel (no /proc, no
// cgroups, no datapath) so that they are unit-tested on any machine. The
// front door finds out who the caller is (the daemon from peer
// credentials and the caller's cgroup; `sluice run` in-process is root,
// unconfined) and the service asks these rules what it may do.

// Caller is who asks for a session, as the rules see it.
type Caller struct {
	// UID, GID and Groups are the caller's credentials: whom its session's
	// command runs as when the request names no user.
	UID    uint32
	GID    uint32
	Groups []uint32
	// Creator: root, or a member of the session group.
	Creator bool
	// Confined: its process runs under sluice (or its cgroup could not be
	// read).
	Confined bool
	// Own is the session the caller runs in, when it is one of this
	// service's; nil when it is not confined, or confined elsewhere.
	Own *Parent
}

// Parent is what a confined caller's own session bounds in the sessions
// started from inside it.
type Parent struct {
	Name   string
	Policy *allowlist.Policy
	Audit  bool
	// EnvSockets are the built-in unix sockets its environment chose and
	// it was given (Session.EnvSockets).
	EnvSockets []string
}

// mayCreate says why c may not create sessions (group names the session
// group), or nil.
func (c Caller) mayCreate(group string) error {
	if c.UID != 0 && !c.Creator {
		return failf(Forbidden, "uid %d may not create sessions: only root and members of group %q", c.UID, group)
	}
	return nil
}

// mayRunAs says why c may not run a session as user ("": c's own uid),
// or nil: only root names another user.
func (c Caller) mayRunAs(user string) error {
	if user != "" && c.UID != 0 {
		return failf(Forbidden, "user: only root may run a session as another user")
	}
	return nil
}

// errNoParent is the refusal of a caller confined outside this service's
// sessions.
var errNoParent = failf(Forbidden, "the caller is confined by sluice outside this daemon's sessions (or its cgroup is unreadable, or the process that connected has exited): refused")

// Request applies the policy rules of a new session: what it asks for
// (nil: nothing in particular) may only narrow the machine allowlist
// (nil machine: no bound, the in-process service of `sluice run`, whose
// root caller chose the policy), and a confined caller may only narrow
// its own session's policy. It returns what the session asks for from now
// on (nil: whatever the machine allows; a confined caller's session
// without a request asks for its parent's policy). The session enforces
// Intersect(request, machine), again after every change of the machine
// allowlist.
func Request(c Caller, requested, machine *allowlist.Policy) (*allowlist.Policy, error) {
	if requested != nil && machine != nil {
		if _, err := requested.Narrow(machine); err != nil {
			return nil, failf(Forbidden, "a session may only narrow the machine allowlist: %v", err)
		}
	}
	if !c.Confined {
		return requested, nil
	}
	if c.Own == nil {
		return nil, errNoParent
	}
	own := c.Own.Policy
	if requested == nil {
		return own, nil
	}
	if _, err := requested.Narrow(own); err != nil {
		return nil, failf(Forbidden, "a confined process may only narrow its own session's policy: %v", err)
	}
	if ol := own.Local(); ol.Loopback.Strict() && requested.Local().Loopback == "" {
		// A request that does not say inherits its parent's loopback mode
		// and ports: the machine's default ("all") would let a nested
		// session out of its parent's "session" mode.
		l := requested.Local()
		l.Loopback, l.LoopbackPorts = ol.Loopback, ol.LoopbackPorts
		var err error
		if requested, err = requested.WithLocal(l); err != nil {
			return nil, failf(Invalid, "%v", err)
		}
	}
	return requested, nil
}

// envSocketBounds is the rule for the built-in unix sockets that a new
// session's environment chooses ($SSH_AUTH_SOCK, $GNUPGHOME's sockets:
// enforcer.EnvUnixSockets). An unconfined caller's environment is its
// user's own choice: no bound (nil). A confined caller's is not (a
// confined step could set SSH_AUTH_SOCK=/var/run/docker.sock): its new
// session gets at most what the caller's own session was given, for each
// name the same path or nothing, never a new one.
func envSocketBounds(c Caller) *[]string {
	if !c.Confined {
		return nil
	}
	var own []string
	if c.Own != nil {
		own = c.Own.EnvSockets
	}
	b := slices.Clone(own)
	if b == nil {
		b = []string{}
	}
	return &b
}

// Intersect is the part of requested that the machine allows; nil
// requested means "everything the machine allows", nil machine "no
// bound". It is applied again to every session when the machine
// allowlist changes. The local part (unix sockets, loopback) is
// requested's within the machine's.
func Intersect(requested, machine *allowlist.Policy) *allowlist.Policy {
	if requested == nil {
		if machine == nil {
			p, _ := allowlist.New(nil)
			return p
		}
		return machine
	}
	if machine == nil {
		return requested
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
		// Narrow's policy has the entry's ports within the machine's.
		if n, err := one.Narrow(machine); err == nil {
			keep = append(keep, n.Entries()...)
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
