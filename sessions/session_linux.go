// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/exitstatus"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/namecheck"
	"github.com/sluice-dev/sluice/proxy"
)

// Sink receives every event of a session, in order: session_started, its
// denials (within the session's rate limit), session_ended. The daemon
// writes them to its audit log, metrics and streams; `sluice run`
// in-process to the terminal and its --audit-log.
type Sink interface {
	Publish(audit.Event)
}

// Hooks are what a front door does at the points of a session's life
// that are its own (records on disk, its table of sessions). Every field
// may be nil but Sink.
type Hooks struct {
	Sink Sink
	// Registered runs once the session has its name and datapath, before
	// its command starts; it may return the file the command's exit status
	// is written to (package exitstatus), which Start closes.
	Registered func(*Session) (*os.File, error)
	// Started runs once the command runs, before session_started.
	Started func(*Session)
	// Dropped runs when the command could not start: the session is gone.
	Dropped func(*Session)
	// ExitOf is the exit status of a session that is not this process's
	// child (re-adopted) once its cgroup is empty; -1: unknown.
	ExitOf func(*Session) int
	// Ending runs when the session ends, after its datapath is gone and
	// before session_ended.
	Ending func(*Session, int)
	// Ended runs after session_ended, before Done is closed.
	Ended func(*Session, int)
	// Note receives what the session's proxy reports that decides
	// nothing (it could not reach an allowed host); nil: dropped.
	Note func(string)
}

func (h Hooks) registered(ss *Session) (*os.File, error) {
	if h.Registered == nil {
		return nil, nil
	}
	return h.Registered(ss)
}

// Session is one confined session and the command in it, from the
// service's point of view: its enforcer session, its event pipeline and
// its end.
type Session struct {
	// Info is what the API says of the session; set before the session is
	// shared and not changed after but for PID and Hidden at the start.
	Info api.SessionInfo
	// Requested is what the session asks for (nil: the machine's
	// allowlist): the session enforces Intersect(Requested, machine).
	Requested *allowlist.Policy
	// ProxyPort is the port the command's proxy variables name.
	ProxyPort uint16

	sv      *Service
	h       Hooks
	es      *enforcer.Session
	cmd     *exec.Cmd // nil after a re-adoption
	limit   *audit.Limiter
	readers sync.WaitGroup // the session's own event reader (no SharedEvents)
	// started is closed once session_started is out (or at once for a
	// session that starts no command): a denial racing it waits a while,
	// so every log tells the story in order.
	started chan struct{}
	// cmdStarted is closed once the command runs (Start only).
	cmdStarted chan struct{}
	done       chan struct{}

	mu sync.Mutex
	// envSockets are the built-in unix sockets the command's environment
	// chose and the session was given (enforcer.Session.EnvUnixSockets),
	// the bound of the sessions started from inside it. Until they are
	// known (the command has just started), nil: a nested session
	// started meanwhile gets none.
	envSockets []string
	exit       int
	// docker is the session's Docker socket and containers (nil: none).
	docker *dockerSession
}

func (sv *Service) newSession(info api.SessionInfo, requested *allowlist.Policy, h Hooks) *Session {
	return &Session{sv: sv, h: h, Info: info, Requested: requested, limit: audit.NewLimiter(),
		started: make(chan struct{}), done: make(chan struct{})}
}

// Attached is a session for a cgroup this process did not create (a
// re-adopted session, a container, an adopted process): the front door
// makes its enforcer session with DNSOptions and ProxyEvent, binds it
// (Bind), registers it and starts Wait. Its events are not held back
// for a session_started.
func (sv *Service) Attached(info api.SessionInfo, requested *allowlist.Policy, envSockets []string, h Hooks) *Session {
	ss := sv.newSession(info, requested, h)
	close(ss.started)
	ss.envSockets = slices.Clone(envSockets)
	return ss
}

// Ended is a session that ended with code before this process knew it
// (while no daemon ran): only its info and exit status, for clients that
// come back for them.
func Ended(info api.SessionInfo, code int) *Session {
	ss := &Session{Info: info, started: make(chan struct{}), done: make(chan struct{}), exit: code}
	close(ss.started)
	close(ss.done)
	return ss
}

// Bind gives the session its enforcer session and registers it with the
// service (its sandbox refusals find it from then on).
func (ss *Session) Bind(es *enforcer.Session) {
	ss.es = es
	ss.Info.Name = es.Name()
	ss.sv.register(ss)
}

// Forget takes an attached session that could not be completed out of
// the service (its front door closes its enforcer session).
func (ss *Session) Forget() { ss.sv.forget(ss) }

// Enforced is the session's enforcer session.
func (ss *Session) Enforced() *enforcer.Session { return ss.es }

// Cmd is the session's command, nil for one this process did not start.
func (ss *Session) Cmd() *exec.Cmd { return ss.cmd }

// Name is the session's name.
func (ss *Session) Name() string { return ss.Info.Name }

// Started is closed once session_started is out.
func (ss *Session) Started() <-chan struct{} { return ss.started }

// Done is closed once the session has ended.
func (ss *Session) Done() <-chan struct{} { return ss.done }

// Exit is the command's exit status once Done is closed (-1: unknown).
func (ss *Session) Exit() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.exit
}

// EnvSockets are the built-in unix sockets the session was given.
func (ss *Session) EnvSockets() []string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return slices.Clone(ss.envSockets)
}

// AsParent is the session as the bound of the sessions started from
// inside it.
func (ss *Session) AsParent() *Parent {
	p := &Parent{Name: ss.Info.Name, Audit: ss.Info.Audit, EnvSockets: ss.EnvSockets()}
	if ss.es != nil {
		p.Policy = ss.es.Policy()
	}
	return p
}

// DNSOptions are the service's resolver options, reporting to this
// session.
func (ss *Session) DNSOptions() *enforcer.DNSOptions {
	d := ss.sv.cfg.DNS
	d.OnEvent = ss.dnsEvent
	if ss.Info.Ask && ss.sv.cfg.Prompts != nil {
		d.Ask = ss.askDNS
	}
	return &d
}

// KernelEvent hands the session a deny event of its datapath (read by
// the front door from the shared ring buffer, or by the session itself).
func (ss *Session) KernelEvent(ev loader.Event) {
	// An abstract name left to the session's Landlock scope is a denial
	// only when no socket of the session has it.
	ev, report := ss.es.ResolveScoped(ev)
	if !report {
		return
	}
	ss.waitStarted()
	ev = ss.es.ExplainPort(ev)
	ss.Deliver(audit.FromKernel(ss.Info.Name, ev, ss.es.LearnedFrom))
	// A name refused by the kernel's name check is the verifier's kind of
	// refusal (NameEvent), which asks nothing: the address is allowed.
	if ev.Hook != loader.HookTLS && ev.Hook != loader.HookHTTP {
		ss.askAddr(ev)
	}
}

// waitStarted waits (a while) for session_started: a denial can race it.
func (ss *Session) waitStarted() {
	select {
	case <-ss.started:
	case <-time.After(time.Second):
	}
}

func (ss *Session) dnsEvent(ev dnsresolver.Event) {
	// The resolver answers as soon as it is attached, before the attach
	// call has returned the session (a re-adopted session's kernel-path
	// hand-overs arrive at once): the event then names no process.
	owner := ""
	if es := ss.es; es != nil {
		owner = es.SocketOwner(ev.Client)
	}
	ss.Deliver(audit.FromDNS(ss.Info.Name, ev, owner))
}

// ProxyEvent reports the session proxy's refusals (allowed requests
// raise no event; its failures decide nothing and go to the command's
// terminal only in-process, where the proxy's own log is).
func (ss *Session) ProxyEvent(ev proxy.Event) {
	if e, ok := audit.FromProxy(ss.Info.Name, ev); ok {
		ss.Deliver(e)
	} else if ss.h.Note != nil {
		ss.h.Note("proxy: " + ev.String())
	}
}

// NameEvent reports the session verifier's refusals (package namecheck).
func (ss *Session) NameEvent(r namecheck.Refusal) {
	ss.waitStarted()
	ss.Deliver(audit.FromNameCheck(ss.Info.Name, r))
}

// Deliver sends a deny event to the sink within the session's rate limit
// (audit.Limiter).
func (ss *Session) Deliver(e audit.Event) {
	now := time.Now()
	ok, report := ss.limit.Allow(now)
	if !ok {
		return
	}
	if report > 0 {
		ss.publish(audit.SuppressedEvent(ss.Info.Name, report))
	}
	e.Time = now.UTC()
	ss.publish(e)
}

func (ss *Session) publish(e audit.Event) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	ss.h.Sink.Publish(e)
}

// readEvents reads the session's own ring buffer until it is flushed or
// closed.
func (ss *Session) readEvents() {
	ss.readers.Go(func() {
		for {
			ev, err := ss.es.ReadEvent()
			if errors.Is(err, enforcer.ErrBadEvent) {
				continue
			}
			if err != nil {
				return // flushed and drained, or closed
			}
			ss.KernelEvent(ev)
		}
	})
}

// Wait waits for the command (or, for an attached session, for its
// cgroup to empty), then ends the session. It returns early, leaving the
// session running and confined, when the service's Stop is closed first.
func (ss *Session) Wait() {
	code := -1
	if ss.cmd != nil {
		code = exitstatus.Code(ss.cmd.Wait())
	} else if err := ss.es.WaitEmpty(ss.sv.cfg.Stop); err != nil {
		return // stopping: leave the session to the next front door
	} else if ss.h.ExitOf != nil {
		// Re-adopted: the command was not this process's child, but its
		// supervisor left the status behind.
		code = ss.h.ExitOf(ss)
	}
	ss.end(code)
}

// end removes the session: leftover processes are killed, its denials
// drained, its cgroup and map entries removed, session_ended sent.
func (ss *Session) end(code int) {
	ss.sv.sandboxEnded(ss.Info.PID, ss.Info.Name)
	if ss.docker != nil {
		// Its containers first: nothing the session started through the
		// engine outlives it.
		if err := ss.docker.stop(); err != nil {
			ss.publish(audit.Event{Type: audit.SessionEnded, Session: ss.Info.Name, Message: "cleanup: docker: " + err.Error()})
		}
	}
	if ss.sv.cfg.Prompts != nil {
		ss.sv.cfg.Prompts.Forget(ss.Info.Name, "session ended")
	}
	_ = ss.es.Kill()
	if ss.sv.cfg.SharedEvents {
		if ss.sv.cfg.Drain != nil {
			ss.sv.cfg.Drain()
		}
	} else {
		_ = ss.es.FlushEvents()
		ss.readers.Wait()
	}
	if err := ss.es.Close(); err != nil {
		ss.publish(audit.Event{Type: audit.SessionEnded, Session: ss.Info.Name, Message: "cleanup: " + err.Error()})
	}
	if n := ss.limit.Flush(); n > 0 {
		ss.publish(audit.SuppressedEvent(ss.Info.Name, n))
	}
	if ss.h.Ending != nil {
		ss.h.Ending(ss, code)
	}
	e := audit.Event{Type: audit.SessionEnded, Session: ss.Info.Name, Message: fmt.Sprintf("session %s ended", ss.Info.Name)}
	if code >= 0 {
		e.Exit = &code
	}
	ss.publish(e)
	ss.sv.forget(ss)
	ss.mu.Lock()
	ss.exit = code
	ss.mu.Unlock()
	if ss.h.Ended != nil {
		ss.h.Ended(ss, code)
	}
	close(ss.done)
}
