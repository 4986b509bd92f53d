// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/sessions"
)

// recentMax bounds the denials kept per session for `sluice sessions show`.
const recentMax = 20

// session is a daemon-owned session: the service's session (package
// sessions) and what only the daemon keeps of it, its record's details,
// its recent denials and its creating client's stream.
type session struct {
	*sessions.Session
	srv   *Server
	pidfd int // after a re-adoption: the supervisor's, or -1

	mu     sync.Mutex
	recent []audit.Event
	stream chan audit.Event // the creating client's response stream
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
	Local    *allowlist.Local `json:"local,omitempty"`
	AllowAll bool             `json:"allow_all,omitempty"`
	Audit    bool             `json:"audit,omitempty"`
	// Ask: the session asks (a restarted daemon keeps asking; pending
	// prompts and "session" approvals were in the old daemon's memory).
	Ask       bool   `json:"ask,omitempty"`
	DNSPort4  uint16 `json:"dns_port4"`
	DNSPort6  uint16 `json:"dns_port6"`
	ProxyPort uint16 `json:"proxy_port,omitempty"` // named by the command's *_PROXY variables; served there again after a restart
	Parent    string `json:"parent,omitempty"`
	// EnvSockets are the session's envSockets: without them on record, a
	// re-adopted session's nested sessions get no $SSH_AUTH_SOCK at all
	// (never one of their own choosing).
	EnvSockets []string `json:"env_sockets,omitempty"`
	// PID is the session's first process: since sessions have a
	// supervisor (package exitstatus), the one a restarted daemon signals.
	PID int `json:"pid,omitempty"`
	// Docker is the session's Docker socket, which the supervisor keeps
	// for the next daemon to serve again (sessions.Service.ResumeDocker).
	Docker *sessions.DockerState `json:"docker,omitempty"`
}

func (s *Server) recordPath(name string) string { return filepath.Join(s.stateDir(), name+".json") }

func (ss *session) save() error {
	p4, p6 := ss.Enforced().DNSPorts()
	r := record{Name: ss.Info.Name, UID: ss.Info.UID, Created: ss.Info.Created, Audit: ss.Info.Audit, Ask: ss.Info.Ask, DNSPort4: p4, DNSPort6: p6,
		ProxyPort: ss.ProxyPort, Parent: ss.Info.Parent, PID: ss.Info.PID, EnvSockets: ss.EnvSockets(), Docker: ss.Docker()}
	if len(ss.Info.Argv) > 0 {
		r.Argv0 = ss.Info.Argv[0]
	}
	if ss.Requested == nil {
		r.AllowAll = true
	} else {
		for _, e := range ss.Requested.Entries() {
			r.Requested = append(r.Requested, e.String())
		}
		if l := ss.Requested.Local(); !l.IsDefault() {
			r.Local = &l
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	path := ss.srv.recordPath(ss.Info.Name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("save session %s: %w", ss.Info.Name, err)
	}
	return os.Rename(tmp, path)
}

// dnsOptions are the options of every session's resolver, with the
// daemon's upstreams and metrics.
func (s *Server) dnsOptions() enforcer.DNSOptions {
	d := s.cfg.DNS
	d.Upstreams = s.cfg.Upstreams
	d.ObserveUpstream = func(t time.Duration) { s.metrics.upstream.Observe(t.Seconds()) }
	d.OnQuery = func(verdict string) { s.metrics.dnsQueries.WithLabelValues(verdict).Inc() }
	// A held answer never outlasts its prompt.
	d.AskHold = min(dnsresolver.DefaultAskHold, s.prompts.Timeout())
	return d
}

// Publish is the session's sink (sessions.Sink): every event goes to the
// audit log, the metrics and the subscribers; its denials also to the
// session's recent denials and its client's stream, which end with the
// session's exit instead of session_ended.
func (ss *session) Publish(e audit.Event) {
	ss.srv.emit(e)
	if e.Type == audit.SessionStarted || e.Type == audit.SessionEnded {
		return
	}
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

// hooks are the daemon's part of ss's life: its place in the table of
// sessions, its record and exit status file, and the copy kept for
// clients that reattach after it ended.
func (s *Server) hooks(ss *session) sessions.Hooks {
	return sessions.Hooks{
		Sink: ss,
		Registered: func(c *sessions.Session) (*os.File, error) {
			ss.Session = c
			s.mu.Lock()
			s.sessions[c.Info.Name] = ss
			s.mu.Unlock()
			if err := ss.save(); err != nil {
				return nil, err
			}
			// The supervisor writes the command's status here, for this
			// daemon or the next one (package exitstatus).
			status, err := s.openExitStatus(c.Info.Name)
			if err != nil {
				return nil, fail(http.StatusInternalServerError, "exit status file: %v", err)
			}
			return status, nil
		},
		Started: func(*sessions.Session) { _ = ss.save() }, // with the pid, for the next daemon's signals
		Dropped: func(c *sessions.Session) {
			_ = os.Remove(s.recordPath(c.Info.Name))
			_ = os.Remove(s.exitPath(c.Info.Name))
			s.mu.Lock()
			delete(s.sessions, c.Info.Name)
			s.mu.Unlock()
		},
		ExitOf: func(c *sessions.Session) int { return s.adoptedExit(c.Info.Name) },
		Ending: func(c *sessions.Session, _ int) {
			_ = os.Remove(s.recordPath(c.Info.Name))
			_ = os.Remove(s.exitPath(c.Info.Name))
			if c.Cmd() == nil && ss.pidfd >= 0 {
				_ = unix.Close(ss.pidfd)
			}
		},
		Ended: func(c *sessions.Session, code int) {
			s.mu.Lock()
			delete(s.sessions, c.Info.Name)
			s.mu.Unlock()
			// A copy without the closed enforcer session, for clients
			// that reattach after a restart (reattach_linux.go).
			s.ended.add(&session{srv: s, Session: sessions.Ended(c.Info, code)})
		},
	}
}

// attached is a daemon session for a cgroup the daemon did not create
// (re-adopted, a container, an adopted process), not bound yet.
func (s *Server) attached(info api.SessionInfo, requested *allowlist.Policy, envSockets []string) *session {
	ss := &session{srv: s, pidfd: -1}
	ss.Session = s.svc.Attached(info, requested, envSockets, s.hooks(ss))
	return ss
}

// dropAttached undoes an attached session that could not be completed:
// its datapath, its place in the table, its records.
func (s *Server) dropAttached(ss *session) {
	_ = ss.Enforced().Close()
	ss.Forget()
	_ = os.Remove(s.recordPath(ss.Info.Name))
	_ = os.Remove(s.exitPath(ss.Info.Name))
	s.mu.Lock()
	delete(s.sessions, ss.Info.Name)
	s.mu.Unlock()
}

// register puts a bound attached session in the table of sessions.
func (s *Server) register(ss *session) {
	s.mu.Lock()
	s.sessions[ss.Info.Name] = ss
	s.mu.Unlock()
}

// infoNow is the session's info with live counters.
func (ss *session) infoNow() api.SessionInfo {
	info := ss.Info
	es := ss.Enforced()
	if es == nil {
		return info // ended before this daemon started (endedWhileDown)
	}
	info.Policy = sessions.PolicyStrings(es)
	if procs, err := es.Procs(); err == nil {
		info.Processes = len(procs)
	}
	if c, err := es.Counters(); err == nil {
		info.Allowed, info.Denied, info.Audited = c.Allowed, c.Denied, c.Audited
	}
	if r := es.Resolver(); r != nil {
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
	var requested *allowlist.Policy
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
		requested = p
	}
	ss := s.attached(api.SessionInfo{Name: r.Name, UID: r.UID, Created: r.Created, Argv: []string{r.Argv0}, Audit: r.Audit, Ask: r.Ask, Parent: r.Parent},
		requested, r.EnvSockets)
	ss.ProxyPort = r.ProxyPort
	policy := sessions.Intersect(requested, s.machine.Load())
	es, err := s.e.Adopt(r.Name, enforcer.Options{Policy: policy, Audit: r.Audit, DNS: ss.DNSOptions(), Verify: &enforcer.VerifyOptions{OnRefuse: ss.NameEvent},
		Proxy: &enforcer.ProxyOptions{OnEvent: ss.ProxyEvent, Port: r.ProxyPort}, SharedEvents: true,
		UnixSockets: append([]string{s.cfg.SocketPath}, r.EnvSockets...)}, r.DNSPort4, r.DNSPort6)
	if err != nil {
		return err
	}
	ss.Bind(es)
	if err := es.SetPolicy(policy); err != nil {
		return err
	}
	if fd, ok := supervisorPidfd(r.PID, r.Name); ok {
		ss.pidfd, ss.Info.PID = fd, r.PID
	}
	if r.Docker != nil {
		// Its containers stay confined as they were (their datapath
		// entries outlived the daemon) whether or not this works.
		switch {
		case ss.pidfd < 0:
			s.logf("session %s: its Docker socket cannot be served again: its supervisor is gone", r.Name)
		default:
			if err := s.svc.ResumeDocker(ss.Session, *r.Docker, ss.pidfd); err != nil {
				s.logf("session %s: %v", r.Name, err)
			}
		}
	}
	s.register(ss)
	_ = ss.save()
	go ss.Wait()
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
