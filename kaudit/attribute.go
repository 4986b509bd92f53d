// SPDX-License-Identifier: Apache-2.0

package kaudit

import "sync"

// Attributor names the session a refusal belongs to. A session's domain
// is made by its command's shim, which execs the command in place, so the
// domain's first refusal names the command's pid as its creator: a
// session registers the pid it started (AddCreator), the command's or, in
// the daemon, that of the supervisor whose only child is the command, so
// a refusal matches when its domain's creator, the refused process or
// that process's parent is a registered pid. A
// domain once attributed stays attributed, so later refusals find their
// session even when the refused process is already gone. Refusals of
// domains made inside a session (a program that sandboxes itself) are
// found by the refused process's cgroup, while it lives.
type Attributor struct {
	// SessionOf names the session pid is in, "" for none (or gone).
	SessionOf func(pid uint32) string

	mu       sync.Mutex
	domains  map[string]string
	creators map[uint32]string
}

// AddCreator says that session's command, whose shim makes its domain,
// has pid.
func (a *Attributor) AddCreator(pid uint32, session string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.creators == nil {
		a.creators = map[uint32]string{}
	}
	a.creators[pid] = session
}

// RemoveCreator forgets pid (the session ended: the pid may be reused)
// and the domains attributed to session.
func (a *Attributor) RemoveCreator(pid uint32, session string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.creators[pid] == session {
		delete(a.creators, pid)
	}
	for d, s := range a.domains {
		if s == session {
			delete(a.domains, d)
		}
	}
}

// maxDomains bounds the domains remembered; past it the memory starts
// over (attribution then relies on the processes' cgroups alone).
const maxDomains = 4096

// Session is the session d belongs to, or "".
func (a *Attributor) Session(d Denial) string {
	a.mu.Lock()
	var s string
	var ok bool
	for _, pid := range []uint32{d.Creator, d.PID, d.PPID} {
		if s, ok = a.creators[pid]; ok && pid != 0 {
			break
		}
	}
	a.mu.Unlock()
	if ok {
		a.remember(d.Domain, s)
		return s
	}
	a.mu.Lock()
	s, ok = a.domains[d.Domain]
	a.mu.Unlock()
	if ok {
		return s
	}
	if a.SessionOf == nil {
		return ""
	}
	for _, pid := range []uint32{d.PID, d.Creator} {
		if pid == 0 {
			continue
		}
		if s := a.SessionOf(pid); s != "" {
			a.remember(d.Domain, s)
			return s
		}
	}
	return ""
}

func (a *Attributor) remember(domain, session string) {
	if domain == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.domains == nil || len(a.domains) >= maxDomains {
		a.domains = map[string]string{}
	}
	a.domains[domain] = session
}
