// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"sync"
)

// Bounds on the API connections callers may hold at once. Each one costs
// the daemon two descriptors (the socket, the caller's pidfd), up to
// maxFDs more while a session starts, and a goroutine; anyone may connect,
// and a confined agent can too. A user's `sluice run` holds one connection
// per running session and `sluice events` one per follower, so the bounds
// are far above what people use and far below the daemon's descriptor
// limit. Root is not counted: it is trusted, and never confined (sessions
// never run as root).
const (
	maxConnsPerUID = 128
	maxConns       = 1024 // all non-root callers together
)

// connLimits counts the open API connections of each caller (by uid).
type connLimits struct {
	perUID, total int

	mu    sync.Mutex
	open  map[uint32]int
	count int
}

func newConnLimits(perUID, total int) *connLimits {
	return &connLimits{perUID: perUID, total: total, open: map[uint32]int{}}
}

// acquire counts a new connection of uid, or says why it may not have one.
func (l *connLimits) acquire(uid uint32) error {
	if l == nil || uid == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[uid] >= l.perUID {
		return fmt.Errorf("uid %d already has %d connections open to the sluice daemon, the most one user may have: close some and retry", uid, l.perUID)
	}
	if l.count >= l.total {
		return fmt.Errorf("the sluice daemon has %d connections open from non-root users, the most it serves: retry later", l.total)
	}
	l.open[uid]++
	l.count++
	return nil
}

// release gives back a connection that acquire counted.
func (l *connLimits) release(uid uint32) {
	if l == nil || uid == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[uid] == 0 {
		return
	}
	l.count--
	if l.open[uid]--; l.open[uid] == 0 {
		delete(l.open, uid)
	}
}
