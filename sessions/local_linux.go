// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/enforcer"
)

// Local is the in-process front door's runner: `sluice run` as root with
// no daemon runs its session here, through the same Run as api.Client's,
// so that one runner serves both.
type Local struct {
	Service *Service
	// Caller is who asks: root, unconfined.
	Caller Caller
	// Machine bounds the session; its Policy is nil in-process (the root
	// caller chose the policy).
	Machine Machine
	// Policy is the request's policy, already parsed (nil: the request's
	// Allow and Allowlist are parsed).
	Policy *allowlist.Policy
	// ExtraFiles are passed on to the command as descriptors 3, 4, ...
	// (only in-process: a daemon takes stdin, stdout and stderr only).
	ExtraFiles []*os.File
	// OnNote receives lines that report no decision (the proxy failing to
	// reach an allowed host, the DNS path taken); nil: dropped.
	OnNote func(string)

	cur atomic.Pointer[Session]
	tty bool
}

// localSink hands a session's events to Run's callbacks, one at a time.
type localSink struct {
	mu      sync.Mutex
	ss      *Session
	onStart func(api.SessionInfo)
	onEvent func(audit.Event)
	note    func(string)
}

func (k *localSink) Publish(e audit.Event) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch e.Type {
	case audit.SessionStarted:
		if k.onStart != nil && k.ss != nil {
			info := k.ss.Info
			info.Policy = e.Entries
			k.onStart(info)
		}
	case audit.SessionEnded:
		// The runner's caller tells the end, with the status Run returns;
		// only a cleanup failure is worth a line.
		if e.Exit == nil && k.note != nil {
			k.note(fmt.Sprintf("cleaning up session %s: %s", e.Session, strings.TrimPrefix(e.Message, "cleanup: ")))
		}
	default:
		if k.onEvent != nil {
			k.onEvent(e)
		}
	}
}

// Run starts req's session in this process with files as the command's
// stdin, stdout and stderr, calls onStart once the command runs and
// onEvent for each of its denials, and returns the command's exit status
// once the session has ended.
func (l *Local) Run(ctx context.Context, req api.CreateRequest, files [3]*os.File, onStart func(api.SessionInfo), onEvent func(audit.Event)) (int, error) {
	plan, err := Prepare(l.Caller, req, l.Machine, l.Policy, len(files))
	if err != nil {
		return 0, err
	}
	l.tty = isTerminal(files[0])
	sink := &localSink{onStart: onStart, onEvent: onEvent, note: l.OnNote}
	h := Hooks{Sink: sink, Registered: func(ss *Session) (*os.File, error) {
		sink.mu.Lock()
		sink.ss = ss
		sink.mu.Unlock()
		l.cur.Store(ss)
		if err := ss.Enforced().KernelDNSError(); err != nil && l.OnNote != nil {
			if l.Service.cfg.DNS.Path == enforcer.DNSPathAuto {
				l.OnNote(fmt.Sprintf("DNS takes the resolver path, with no kernel failover: %v", err))
			} else {
				l.OnNote(fmt.Sprintf("DNS takes the resolver path: %v", err))
			}
		}
		return nil, nil
	}}
	if l.OnNote != nil {
		h.Note = func(line string) { l.OnNote(line) }
	}
	ss, err := l.Service.Start(plan, World{}, files, l.ExtraFiles, h)
	if err != nil {
		return 0, err
	}
	select {
	case <-ss.Done():
	case <-ctx.Done():
		_ = ss.Enforced().Kill()
		<-ss.Done()
		return 0, ctx.Err()
	}
	return ss.Exit(), nil
}

// Signal sends sig (a name such as "TERM") to the running session's
// command. ^C and ^\ from a terminal already reached the command (it is
// in the terminal's process group): they are not sent twice.
func (l *Local) Signal(_ context.Context, name, sig string) error {
	ss := l.cur.Load()
	if ss == nil || ss.Name() != name || ss.Cmd() == nil {
		return fmt.Errorf("no session %q running here", name)
	}
	s := unix.SignalNum("SIG" + strings.TrimPrefix(strings.ToUpper(sig), "SIG"))
	if s == 0 {
		return fmt.Errorf("unknown signal %q", sig)
	}
	if l.tty && (s == unix.SIGINT || s == unix.SIGQUIT) {
		return nil
	}
	return ss.Cmd().Process.Signal(s)
}
