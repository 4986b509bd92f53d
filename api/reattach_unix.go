// SPDX-License-Identifier: Apache-2.0

//go:build unix

package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/audit"
)

// ErrDaemonGone is wrapped by Reattach's error when no daemon answered for
// the session within the bound after the last one went away.
var ErrDaemonGone = errors.New("no daemon came back")

// reattachPoll is how often Reattach knocks while no daemon answers.
const reattachPoll = 100 * time.Millisecond

// Reattach follows session name to its exit status after the daemon that
// streamed it went away (Run or Wait returned a StreamLostError): it waits
// up to bound for a daemon to answer for the session, and again, with a new
// bound, each time the stream is lost anew. Only the wait for a daemon is
// bounded: once one has the session, the command may run as long as it
// likes. restarted (if not nil) gets the session the first time a new
// daemon has it, fn its events from then on.
//
// The session stays confined whatever happens here (the kernel enforces,
// not this stream): an error means only that this client gives up. It
// wraps ErrNoSuchSession when the new daemon does not know the session,
// ErrDaemonGone when none answered within bound, and ctx's error when ctx
// ended.
func (c *Client) Reattach(ctx context.Context, name string, bound time.Duration, restarted func(SessionInfo), fn func(audit.Event)) (int, error) {
	said := false
	deadline := time.Now().Add(bound)
	for {
		wctx, cancel := context.WithCancel(ctx)
		timer := time.AfterFunc(time.Until(deadline), cancel)
		code, err := c.Wait(wctx, name, func(s SessionInfo) {
			timer.Stop()
			if !said {
				said = true
				if restarted != nil {
					restarted(s)
				}
			}
		}, fn)
		timer.Stop()
		cancel()
		switch {
		case err == nil:
			return code, nil
		case errors.Is(err, ErrSessionStreamLost):
			// It went away again: a new bound for the next one.
			deadline = time.Now().Add(bound)
		case errors.Is(err, ErrNoSuchSession):
			return 0, fmt.Errorf("reattach to session %s: %w", name, err)
		case !errors.Is(err, ErrNoDaemon) && ctx.Err() == nil && time.Now().Before(deadline):
			return 0, fmt.Errorf("reattach to session %s: %w", name, err)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if !time.Now().Before(deadline) {
			return 0, fmt.Errorf("session %s: %w within %v", name, ErrDaemonGone, bound)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(reattachPoll):
		}
	}
}
