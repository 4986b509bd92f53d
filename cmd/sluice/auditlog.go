// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/audit"
)

// runAudit is `sluice run --audit-log`: the session's denials, and its
// start and end, as JSON lines in the daemon's audit format
// (docs/audit.md), so a CI job can keep them as an artifact.
type runAudit struct {
	log     *audit.Log // nil: no --audit-log
	session string
	// ready is closed once session_started is written: a denial racing
	// the start waits for it (a while), so the log tells the story in order.
	ready     chan struct{}
	readyOnce sync.Once
	limit     *audit.Limiter // deny lines, as the daemon limits them
}

func openRunAudit(path string) (*runAudit, error) {
	a := &runAudit{ready: make(chan struct{}), limit: audit.NewLimiter()}
	if path == "" {
		return a, nil
	}
	l, err := audit.OpenLog(path)
	if err != nil {
		return nil, fmt.Errorf("--audit-log: %w", err)
	}
	a.log = l
	return a, nil
}

func (a *runAudit) on() bool { return a.log != nil }

func (a *runAudit) write(e audit.Event) {
	if a.log == nil {
		return
	}
	if e.Type != audit.SessionStarted {
		select {
		case <-a.ready:
		case <-time.After(time.Second):
		}
	}
	// Read only now: session is set before session_started, and the
	// wait above orders that before this.
	if e.Session == "" {
		e.Session = a.session
	}
	if e.Type != audit.SessionStarted && e.Type != audit.SessionEnded {
		ok, report := a.limit.Allow(time.Now())
		if !ok {
			return
		}
		if report > 0 {
			a.log.Write(audit.SuppressedEvent(a.session, report))
		}
	}
	a.log.Write(e)
}

// started writes session_started: the command's pid, the uid it runs as,
// and the session's policy.
func (a *runAudit) started(pid int, uid uint32, exe string, entries []string, argv0 string) {
	a.write(audit.Event{Type: audit.SessionStarted, Session: a.session, PID: uint32(pid), UID: &uid, Exe: exe,
		Entries: entries, Message: fmt.Sprintf("session %s started: %s", a.session, argv0)})
	a.readyOnce.Do(func() { close(a.ready) })
}

// ended writes session_ended with the command's exit status, read from
// the error supervise returned.
func (a *runAudit) ended(waitErr error) {
	code := 0
	var ee *exitError
	switch {
	case errors.As(waitErr, &ee):
		code = ee.code
	case waitErr != nil:
		code = exitSluiceError
	}
	if a.log == nil {
		return
	}
	if n := a.limit.Flush(); n > 0 {
		a.log.Write(audit.SuppressedEvent(a.session, n))
	}
	a.write(audit.Event{Type: audit.SessionEnded, Session: a.session, Exit: &code, Message: fmt.Sprintf("session %s ended", a.session)})
}

func (a *runAudit) close() {
	if a.log != nil {
		_ = a.log.Close()
	}
}
