// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/proxy"
)

// recentMax bounds the denials kept per session for `sluice sessions show`.
const recentMax = 20

// session is a daemon-owned enforcer session and the command in it.
type session struct {
	srv       *Server
	limit     *audit.Limiter
	s         *enforcer.Session
	info      api.SessionInfo
	requested *allowlist.Policy // what the client asked for; nil = the machine's
	cmd       *exec.Cmd         // nil after a re-adoption
	pidfd     int               // after a re-adoption: the supervisor's, or -1
	// proxyPort is the port the command's proxy variables name; after an
	// adoption that could not serve it again, still the record's.
	proxyPort uint16

	mu sync.Mutex
	// envSockets are the built-in unix sockets the command's environment
	// chose and the session was given (enforcer.Session.EnvUnixSockets),
	// kept on record: the bound of the sessions started from inside it.
	// Until they are known (the command has just started), nil: a nested
	// session started meanwhile gets none.
	envSockets []string
	recent     []audit.Event
	stream     chan audit.Event // the creating client's response stream
	started    chan struct{}    // closed once session_started is on record
	done       chan struct{}
	exit       int
}

// record is what survives a daemon crash, in the state directory.
type record struct {
	Name      string    `json:"name"`
	UID       uint32    `json:"uid"`
	Created   time.Time `json:"created"`
	Argv0     string    `json:"argv0"`
	Requested []string  `json:"requested,omitempty"`
	// Local is the requested policy's local part (unix sockets, loopback
	// mode and ports) when it is not the default: without it a restart
	// would reopen loopback to a "loopback": "session" session.
	Local     *allowlist.Local `json:"local,omitempty"`
	AllowAll  bool             `json:"allow_all,omitempty"`
	Audit     bool             `json:"audit,omitempty"`
	DNSPort4  uint16           `json:"dns_port4"`
	DNSPort6  uint16           `json:"dns_port6"`
	ProxyPort uint16           `json:"proxy_port,omitempty"` // named by the command's *_PROXY variables; served there again after a restart
	Parent    string           `json:"parent,omitempty"`
	// EnvSockets are the session's envSockets: without them on record, a
	// re-adopted session's nested sessions get no $SSH_AUTH_SOCK at all
	// (never one of their own choosing).
	EnvSockets []string `json:"env_sockets,omitempty"`
	// PID is the session's first process: since sessions have a
	// supervisor (package exitstatus), the one a restarted daemon signals.
	PID int `json:"pid,omitempty"`
}

// givenEnvSockets is envSockets, read under ss.mu.
func (ss *session) givenEnvSockets() []string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return slices.Clone(ss.envSockets)
}

func (s *Server) recordPath(name string) string { return filepath.Join(s.stateDir(), name+".json") }

func (ss *session) save() error {
	p4, p6 := ss.s.DNSPorts()
	r := record{Name: ss.info.Name, UID: ss.info.UID, Created: ss.info.Created, Audit: ss.info.Audit, DNSPort4: p4, DNSPort6: p6,
		ProxyPort: ss.proxyPort, Parent: ss.info.Parent, PID: ss.info.PID, EnvSockets: ss.givenEnvSockets()}
	if len(ss.info.Argv) > 0 {
		r.Argv0 = ss.info.Argv[0]
	}
	if ss.requested == nil {
		r.AllowAll = true
	} else {
		for _, e := range ss.requested.Entries() {
			r.Requested = append(r.Requested, e.String())
		}
		if l := ss.requested.Local(); !l.IsDefault() {
			r.Local = &l
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	path := ss.srv.recordPath(ss.info.Name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("save session %s: %w", ss.info.Name, err)
	}
	return os.Rename(tmp, path)
}

// dnsOptions are the session resolver's options, reporting its events.
func (s *Server) dnsOptions(ss *session) *enforcer.DNSOptions {
	d := s.cfg.DNS
	d.Upstreams = s.cfg.Upstreams
	d.OnEvent = func(ev dnsresolver.Event) { ss.dnsEvent(ev) }
	d.ObserveUpstream = func(t time.Duration) { s.metrics.upstream.Observe(t.Seconds()) }
	d.OnQuery = func(verdict string) { s.metrics.dnsQueries.WithLabelValues(verdict).Inc() }
	return &d
}

func (ss *session) kernelEvent(ev loader.Event) {
	// An abstract name left to the session's Landlock scope is a denial
	// only when no socket of the session has it.
	ev, report := ss.s.ResolveScoped(ev)
	if !report {
		return
	}
	// A denial can race the start's audit line: keep the story in order.
	select {
	case <-ss.started:
	case <-time.After(time.Second):
	}
	var learnedFrom func(netip.Addr) []string
	if r := ss.s.Resolver(); r != nil {
		learnedFrom = r.LearnedFrom
	}
	ss.deliver(audit.FromKernel(ss.info.Name, ev, learnedFrom))
}

func (ss *session) dnsEvent(ev dnsresolver.Event) {
	// The resolver answers as soon as it is attached, before the attach
	// call has returned the session (a re-adopted session's kernel-path
	// hand-overs arrive at once): the event then names no process.
	owner := ""
	if es := ss.s; es != nil {
		owner = es.SocketOwner(ev.Client)
	}
	ss.deliver(audit.FromDNS(ss.info.Name, ev, owner))
}

// proxyEvent reports the session proxy's refusals (allowed requests raise
// no event).
func (ss *session) proxyEvent(ev proxy.Event) {
	if e, ok := audit.FromProxy(ss.info.Name, ev); ok {
		ss.deliver(e)
	}
}

// deliver sends a deny event everywhere it belongs, within the session's
// rate limit (audit.Limiter).
func (ss *session) deliver(e audit.Event) {
	now := time.Now()
	ok, report := ss.limit.Allow(now)
	if !ok {
		return
	}
	if report > 0 {
		ss.reportSuppressed(report)
	}
	e.Time = now.UTC()
	ss.publish(e)
}

// reportSuppressed writes the events_suppressed line for n events.
func (ss *session) reportSuppressed(n int) {
	ss.publish(audit.SuppressedEvent(ss.info.Name, n))
}

// publish sends e to the audit log, the metrics and the subscribers, the
// session's recent denials and its client's stream.
func (ss *session) publish(e audit.Event) {
	ss.srv.emit(e)
	ss.mu.Lock()
	ss.recent = append(ss.recent, e)
	if len(ss.recent) > recentMax {
		ss.recent = ss.recent[len(ss.recent)-recentMax:]
	}
	stream := ss.stream
	ss.mu.Unlock()
	if stream != nil {
		select {
		case stream <- e:
		default:
		}
	}
}

// waitCommand waits for the command (or, after adoption, for the cgroup to
// empty), then ends the session.
func (ss *session) waitCommand() {
	code := -1
	if ss.cmd != nil {
		err := ss.cmd.Wait()
		code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		} else if err != nil {
			code = 125
		}
	} else if err := ss.s.WaitEmpty(ss.srv.stop); err != nil {
		return // daemon stopping: leave the session to the next daemon
	} else {
		// Re-adopted: the command was not this daemon's child, but its
		// supervisor left the status behind.
		code = ss.srv.adoptedExit(ss.info.Name)
	}
	ss.end(code)
}

// end removes the session: leftover processes are killed, its cgroup, map
// entries and record removed.
func (ss *session) end(code int) {
	ss.srv.sandboxEnded(ss.info.PID, ss.info.Name)
	_ = ss.s.Kill()
	ss.srv.drainEvents()
	if err := ss.s.Close(); err != nil {
		ss.srv.emit(audit.Event{Type: audit.SessionEnded, Session: ss.info.Name, Message: "cleanup: " + err.Error()})
	}
	if n := ss.limit.Flush(); n > 0 {
		ss.reportSuppressed(n)
	}
	_ = os.Remove(ss.srv.recordPath(ss.info.Name))
	_ = os.Remove(ss.srv.exitPath(ss.info.Name))
	if ss.cmd == nil && ss.pidfd >= 0 {
		_ = unix.Close(ss.pidfd)
	}
	// Publish while the session is still known, so its owner's event
	// stream (filtered by session) gets the end too.
	e := audit.Event{Type: audit.SessionEnded, Session: ss.info.Name, Message: fmt.Sprintf("session %s ended", ss.info.Name)}
	if code >= 0 {
		e.Exit = &code
	}
	ss.srv.emit(e)
	ss.srv.mu.Lock()
	delete(ss.srv.sessions, ss.info.Name)
	ss.srv.mu.Unlock()
	ss.mu.Lock()
	ss.exit = code
	ss.mu.Unlock()
	// A copy without the closed enforcer session, for clients that
	// reattach after a restart (reattach_linux.go).
	ss.srv.ended.add(&session{srv: ss.srv, info: ss.info, done: closedChan(), started: closedChan(), exit: code})
	close(ss.done)
}

// infoNow is the session's info with live counters.
func (ss *session) infoNow() api.SessionInfo {
	info := ss.info
	if ss.s == nil {
		return info // ended before this daemon started (endedWhileDown)
	}
	for _, e := range ss.s.Policy().Entries() {
		info.Policy = append(info.Policy, e.String())
	}
	if procs, err := ss.s.Procs(); err == nil {
		info.Processes = len(procs)
	}
	if c, err := ss.s.Counters(); err == nil {
		info.Allowed, info.Denied, info.Audited = c.Allowed, c.Denied, c.Audited
	}
	if r := ss.s.Resolver(); r != nil {
		info.LearnedIPs = r.LearnedCount()
	}
	ss.mu.Lock()
	info.Recent = append([]audit.Event(nil), ss.recent...)
	ss.mu.Unlock()
	return info
}

// adoptAll re-adopts the sessions a previous daemon recorded.
func (s *Server) adoptAll() {
	entries, err := os.ReadDir(s.stateDir())
	if err != nil {
		return
	}
	for _, de := range entries {
		if !strings.HasSuffix(de.Name(), ".json") {
			continue
		}
		path := filepath.Join(s.stateDir(), de.Name())
		b, err := os.ReadFile(path)
		var r record
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil {
			_ = os.Remove(path)
			continue
		}
		if err := s.adopt(r); err != nil {
			if s.endedWhileDown(r) {
				_ = os.Remove(path)
				continue
			}
			s.emit(audit.Event{Type: audit.SessionEnded, Session: r.Name, Message: fmt.Sprintf("session %s not adopted: %v", r.Name, err)})
			_ = os.Remove(path)
		}
	}
}

func (s *Server) adopt(r record) error {
	ss := &session{srv: s, limit: audit.NewLimiter(), done: make(chan struct{}), started: closedChan(), proxyPort: r.ProxyPort, envSockets: r.EnvSockets,
		info: api.SessionInfo{Name: r.Name, UID: r.UID, Created: r.Created, Argv: []string{r.Argv0}, Audit: r.Audit, Parent: r.Parent}}
	if !r.AllowAll {
		p, err := allowlist.FromStrings(r.Requested)
		if err != nil {
			return err
		}
		if r.Local != nil {
			if p, err = p.WithLocal(*r.Local); err != nil {
				return err
			}
		}
		ss.requested = p
	}
	policy := intersect(ss.requested, s.machine.Load())
	es, err := s.e.Adopt(r.Name, enforcer.Options{Policy: policy, Audit: r.Audit, DNS: s.dnsOptions(ss),
		Proxy: &enforcer.ProxyOptions{OnEvent: ss.proxyEvent, Port: r.ProxyPort}, SharedEvents: true,
		UnixSockets: append([]string{s.cfg.SocketPath}, r.EnvSockets...)}, r.DNSPort4, r.DNSPort6)
	if err != nil {
		return err
	}
	ss.s = es
	if err := es.SetPolicy(policy); err != nil {
		return err
	}
	ss.pidfd = -1
	if fd, ok := supervisorPidfd(r.PID, r.Name); ok {
		ss.pidfd, ss.info.PID = fd, r.PID
	}
	s.mu.Lock()
	s.sessions[r.Name] = ss
	s.mu.Unlock()
	_ = ss.save()
	go ss.waitCommand()
	msg := fmt.Sprintf("session %s re-adopted after a daemon restart", r.Name)
	if err := es.ProxyError(); err != nil {
		// The command's proxy variables cannot be changed: say why
		// programs that use them now fail to connect.
		msg += fmt.Sprintf("; its allowlist proxy could not be restarted (%v): programs that use HTTPS_PROXY, HTTP_PROXY or ALL_PROXY cannot connect", err)
		s.logf("%s", msg)
	}
	s.emit(audit.Event{Type: audit.SessionAdopted, Session: r.Name, Message: msg})
	return nil
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
