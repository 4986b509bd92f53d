// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/audit"
)

// AuditLog is `sluice run --audit-log`: the session's denials, and its
// start and end, as JSON lines in the daemon's audit format
// (docs/audit.md), so a CI job can keep them as an artifact.
type AuditLog struct {
	log *audit.Log // nil: no --audit-log
	// Session names the session in lines that name none; set before
	// Started.
	Session string
	// ready is closed once session_started is written: a denial racing
	// the start waits for it (a while), so the log tells the story in order.
	ready     chan struct{}
	readyOnce sync.Once
	limit     *audit.Limiter // deny lines, as the daemon limits them
}

// OpenAuditLog opens the log at path ("": none, every method a no-op).
func OpenAuditLog(path string) (*AuditLog, error) {
	a := &AuditLog{ready: make(chan struct{}), limit: audit.NewLimiter()}
	if path == "" {
		return a, nil
	}
	l, err := audit.OpenLog(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	a.log = l
	return a, nil
}

// On reports whether there is a log to write.
func (a *AuditLog) On() bool { return a.log != nil }

// Write writes e, in order after session_started and within the
// daemon's rate limit for denials.
func (a *AuditLog) Write(e audit.Event) {
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
		e.Session = a.Session
	}
	if e.Type != audit.SessionStarted && e.Type != audit.SessionEnded {
		ok, report := a.limit.Allow(time.Now())
		if !ok {
			return
		}
		if report > 0 {
			a.log.Write(audit.SuppressedEvent(a.Session, report))
		}
	}
	a.log.Write(e)
}

// Started writes session_started: the command's pid, the uid it runs as,
// and the session's policy.
func (a *AuditLog) Started(pid int, uid uint32, exe string, entries []string, argv0 string) {
	a.Write(audit.Event{Type: audit.SessionStarted, Session: a.Session, PID: uint32(pid), UID: &uid, Exe: exe,
		Entries: entries, Message: fmt.Sprintf("session %s started: %s", a.Session, argv0)})
	a.readyOnce.Do(func() { close(a.ready) })
}

// Ended writes session_ended with the command's exit status.
func (a *AuditLog) Ended(code int) {
	if a.log == nil {
		return
	}
	if n := a.limit.Flush(); n > 0 {
		a.log.Write(audit.SuppressedEvent(a.Session, n))
	}
	a.Write(audit.Event{Type: audit.SessionEnded, Session: a.Session, Exit: &code, Message: fmt.Sprintf("session %s ended", a.Session)})
}

// Close closes the log.
func (a *AuditLog) Close() {
	if a.log != nil {
		_ = a.log.Close()
	}
}
