// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"fmt"
	"sync"
	"time"
)

// A confined program can make denials as fast as the kernel refuses them
// (a connect loop, a flood of refused DNS names): an audit line each would
// let it fill the disk under the log. Like auditd's rate limit, a session
// writes at most eventBurst deny lines at once and eventRate a second after
// that; the rest are counted, and an events_suppressed line says how many,
// at most once a second and when the session ends. The counters
// (sluice_connections_total, sluice_dns_queries_total...) still count
// every decision.
const (
	eventBurst = 1000
	eventRate  = 100 // lines a second once the burst is spent
)

// Bucket is a token bucket: Burst tokens at once, then Rate a second. The
// zero time is "never taken": the first Take finds the bucket full. It is
// not safe for concurrent use; its owner holds a lock.
type Bucket struct {
	Burst, Rate float64
	tokens      float64
	last        time.Time
}

// Take spends a token at now, or says that none is left.
func (b *Bucket) Take(now time.Time) bool {
	if b.last.IsZero() {
		b.tokens = b.Burst
	} else {
		b.tokens = min(b.Burst, b.tokens+now.Sub(b.last).Seconds()*b.Rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Limiter is a session's token bucket for deny lines, in the daemon and
// in `sluice run --audit-log` alike; the daemon also limits its API
// refusal lines with one.
type Limiter struct {
	mu         sync.Mutex
	bucket     Bucket
	suppressed int
	reported   time.Time // when the last events_suppressed line went out
}

// NewLimiter returns a full bucket.
func NewLimiter() *Limiter { return &Limiter{bucket: Bucket{Burst: eventBurst, Rate: eventRate}} }

// Allow says whether an event at now may be written, and how many were
// suppressed before it that must be reported first (0: none, or not yet:
// at most one report a second).
func (l *Limiter) Allow(now time.Time) (ok bool, report int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.bucket.Take(now) {
		l.suppressed++
		return false, 0
	}
	if l.suppressed > 0 && now.Sub(l.reported) >= time.Second {
		report, l.suppressed, l.reported = l.suppressed, 0, now
	}
	return true, report
}

// Flush returns the suppressed events not reported yet.
func (l *Limiter) Flush() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.suppressed
	l.suppressed = 0
	return n
}

// SuppressedEvent is the events_suppressed line for n of session's deny
// lines; session "" stands for the daemon API's refusal lines.
func SuppressedEvent(session string, n int) Event {
	if session == "" {
		return Event{Type: Suppressed, Suppressed: n, Time: time.Now().UTC(),
			Message: fmt.Sprintf("%d more refused API requests not written (over %d a second)", n, eventRate)}
	}
	return Event{Type: Suppressed, Session: session, Suppressed: n, Time: time.Now().UTC(),
		Message: fmt.Sprintf("%d more denials of session %s not written (over %d a second; the counters have them all)", n, session, eventRate)}
}
