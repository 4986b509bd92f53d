// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/kaudit"
	"github.com/sluice-dev/sluice/prompts"
	"github.com/sluice-dev/sluice/sandbox"
)

// Config configures a Service.
type Config struct {
	// DNS are the options of every session's resolver; OnEvent is the
	// session's own (Session.DNSOptions).
	DNS enforcer.DNSOptions
	// UnixSockets are unix sockets every session may reach besides its
	// policy's: the daemon's API socket, so that a nested `sluice run`
	// reaches it.
	UnixSockets []string
	// SharedEvents: the sessions' kernel events go to the datapath's
	// global ring buffer, which the front door reads and hands to
	// Session.KernelEvent (a daemon with many sessions); Drain returns
	// once what is in it was handed over. Otherwise each session reads
	// its own.
	SharedEvents bool
	Drain        func()
	// Stop ends the waits of sessions that are not this process's
	// children (re-adopted, attached) when the front door stops: they are
	// left running, confined, to the next one.
	Stop <-chan struct{}
	// OnSandboxDenied counts a sandbox refusal by its access (metrics).
	OnSandboxDenied func(access string)
	// Prompts is ask mode's prompt table (the daemon's); nil: ask-mode
	// requests are refused (ErrAskNeedsDaemon).
	Prompts *prompts.Table
	// OnPermission counts an ask-mode event by its audit type (metrics),
	// before the rate limit.
	OnPermission func(typ string)
	// Logf writes what an operator must hear of; nil: nothing.
	Logf func(format string, args ...any)
	// Docker: sessions may ask for a Docker socket (docker_linux.go),
	// as Prepare's rule allows the caller. A daemon that says so leaves
	// the containers of its sessions' brokers to them (BrokerContainer)
	// and hands their kernel events to the sessions Lookup finds.
	Docker bool
}

// Service runs sessions: one per request, from the validated plan to the
// command's end, with one event pipeline. Both front doors use it: the
// daemon behind its API, `sluice run` in-process.
type Service struct {
	e   *enforcer.Enforcer
	cfg Config

	mu       sync.Mutex
	sessions map[string]*Session

	// sandboxWatch reads the sessions' Landlock refusals (nil: they cannot
	// be read); sandboxAttr finds their sessions.
	sandboxWatch *kaudit.Watch
	sandboxAttr  *kaudit.Attributor
}

// NewService is a service on e.
func NewService(e *enforcer.Enforcer, cfg Config) *Service {
	return &Service{e: e, cfg: cfg, sessions: map[string]*Session{}, sandboxAttr: &kaudit.Attributor{SessionOf: e.SessionOfPID}}
}

// WatchSandbox starts reading the kernel's Landlock audit records, so
// that a refusal by a session's sandbox becomes a sandbox_denied event of
// that session. It reads whether or not the machine's audit is on now:
// auditd may start later. Where the records cannot be read (no
// CAP_AUDIT_READ) it says so once and goes on: the refusals still happen,
// unexplained, and `sluice check` says why.
func (sv *Service) WatchSandbox() {
	w, err := kaudit.Start(sv.sandboxDenial)
	if err != nil {
		sv.logf("sandbox refusals will not be explained: %v", err)
		return
	}
	sv.sandboxWatch = w
}

// Close stops reading the Landlock records. Sessions are left as they are.
func (sv *Service) Close() {
	if sv.sandboxWatch != nil {
		_ = sv.sandboxWatch.Close()
	}
}

// Enforcer is the datapath the sessions run on.
func (sv *Service) Enforcer() *enforcer.Enforcer { return sv.e }

func (sv *Service) logf(format string, args ...any) {
	if sv.cfg.Logf != nil {
		sv.cfg.Logf(format, args...)
	}
}

// World is where a session's command starts, as its front door found it.
type World struct {
	// MountNamespaceOf is a pidfd of the caller whose view of the file
	// system the session's starts from; nil: this process's.
	MountNamespaceOf *os.File
	// Joined: the caller is in other namespaces (a container the
	// configuration lets in); the command starts in them (NamespacesOf)
	// and its resolver and proxy listen in NetNS.
	Joined       bool
	NamespacesOf *os.File
	NetNS        *os.File
	// Note is what session_started adds about the world ("" for none).
	Note string
}

// Start creates the session of plan and starts its command with files
// (stdin, stdout, stderr) and extra descriptors (3, 4, ...: only for an
// in-process front door). The session is registered with h.Registered
// before the command starts, and its events go to h.Sink from then on;
// session_started is the first of them once the command runs. The session
// ends by itself when the command exits (Wait).
func (sv *Service) Start(plan *Plan, w World, files [3]*os.File, extra []*os.File, h Hooks) (*Session, error) {
	req := plan.Req
	if !w.Joined {
		// In this process's world now, what path names can be looked at
		// (in the caller's own namespaces, the shim says what it cannot
		// run).
		if err := checkCommand(plan.Spawn, req.Dir, plan.Path); err != nil {
			return nil, wrapf(Invalid, err, "start %s", req.Argv[0])
		}
	}
	if req.Ask && sv.cfg.Prompts == nil {
		return nil, wrapf(Invalid, ErrAskNeedsDaemon, "ask mode")
	}
	if req.Docker && !sv.cfg.Docker {
		return nil, failf(Invalid, `docker: a Docker socket (--docker, or "docker": true in the session's policy file) is given by sudo sluice run with the embedded enforcer, not by the daemon (yet)`)
	}
	ss := sv.newSession(api.SessionInfo{UID: plan.Spawn.UID, Created: time.Now().UTC(), Argv: req.Argv, Audit: req.Audit, Ask: req.Ask, Parent: plan.Parent()},
		plan.Requested, h)
	ss.cmdStarted = make(chan struct{})
	unixSockets, env := sv.cfg.UnixSockets, req.Env
	dockerPath := ""
	var dockerNames []string
	if req.Docker {
		// The session reaches its own Docker socket, by this name only;
		// the engine's stays refused unless its policy lists it.
		dockerPath = dockerSocketPath(sv.e.StateDir())
		unixSockets = append(slices.Clone(unixSockets), dockerPath)
		env = append(slices.Clone(env), "DOCKER_HOST=unix://"+dockerPath)
		// And by the usual names, where they exist: in the session's
		// mount namespace they are the broker's socket (bound over the
		// engine's), so a client that ignores DOCKER_HOST gets the
		// broker too.
		dockerNames = sandbox.DockerSocketsHere()
		unixSockets = append(unixSockets, dockerNames...)
	}
	es, err := sv.e.NewSession(enforcer.Options{Policy: plan.Policy, Audit: req.Audit,
		PidsMax: req.PidsMax, MemoryMax: req.MemoryMax, DNS: ss.DNSOptions(),
		Proxy: &enforcer.ProxyOptions{OnEvent: ss.ProxyEvent}, Verify: &enforcer.VerifyOptions{OnRefuse: ss.NameEvent}, SharedEvents: sv.cfg.SharedEvents, UnixSockets: unixSockets, NetNS: w.NetNS})
	if err != nil {
		return nil, wrapf(Invalid, err, "session")
	}
	ss.Bind(es)
	ss.ProxyPort = es.ProxyAddr().Port()
	if req.Docker {
		if err := sv.startDocker(ss, plan, dockerPath); err != nil {
			_ = es.Close()
			sv.forget(ss)
			return nil, wrapf(Invalid, err, "docker")
		}
	}
	spec := enforcer.CommandSpec{Path: plan.Path, Argv: req.Argv, Env: env, NoProxyEnv: req.NoProxyEnv, Dir: req.Dir,
		Stdin: files[0], Stdout: files[1], Stderr: files[2], ExtraFiles: extra, User: plan.Spawn,
		Sandbox: enforcer.SandboxSpec{ShareProcesses: req.ShareProcesses, Hidden: &plan.Hidden, MountNamespaceOf: w.MountNamespaceOf,
			AllowUserNamespaces: req.AllowUserNamespaces, ReadOnly: plan.ReadOnly},
		EnvSocketsWithin: plan.EnvSocketsWithin}
	if len(dockerNames) > 0 {
		spec.Sandbox.DockerSocket, spec.Sandbox.DockerNames = dockerPath, dockerNames
	}
	if w.Joined {
		spec.Sandbox.NamespacesOf = w.NamespacesOf
	}
	var hid []string // filled on the spawning thread, before Start returns
	spec.Sandbox.OnHidden = func(path string) { hid = append(hid, path) }
	stderr := files[2]
	spec.Sandbox.OnNote = func(note string) { fmt.Fprintf(stderr, "sluice: note: %s\n", note) }
	spec.Sandbox.OnSocketDropped = func(name, why string) {
		fmt.Fprintf(stderr, "sluice: note: the unix socket %s is not reachable in this session: %s\n", name, why)
	}
	if !sv.cfg.SharedEvents {
		ss.readEvents()
	}
	sv.register(ss)
	status, err := h.registered(ss)
	if err != nil {
		sv.drop(ss)
		return nil, err
	}
	spec.ExitStatus = status
	if status != nil {
		// A supervised session's supervisor keeps its Docker socket for
		// the next daemon (ResumeDocker).
		if spec.Kept, err = ss.keptListener(); err != nil {
			status.Close()
			sv.drop(ss)
			return nil, wrapf(Internal, err, "docker")
		}
	}
	cmd, err := es.Start(spec)
	if status != nil {
		status.Close()
	}
	if spec.Kept != nil {
		spec.Kept.Close()
	}
	if err != nil {
		close(ss.started)
		sv.drop(ss)
		return nil, wrapf(Invalid, err, "start %s", req.Argv[0])
	}
	ss.cmd = cmd
	ss.Info.PID = cmd.Process.Pid
	ss.Info.Hidden = hid
	if ss.docker != nil {
		ss.docker.setGuarded(slices.Concat(hid, plan.ReadOnly.Machine, plan.ReadOnly.Session))
	}
	ss.mu.Lock()
	ss.envSockets = es.EnvUnixSockets()
	ss.mu.Unlock()
	close(ss.cmdStarted)
	sv.sandboxStarted(cmd.Process.Pid, ss.Info.Name)
	if h.Started != nil {
		h.Started(ss)
	}
	ss.publish(audit.Event{Type: audit.SessionStarted, Session: ss.Info.Name, PID: uint32(cmd.Process.Pid), UID: &plan.Spawn.UID,
		Exe: plan.Path, Entries: PolicyStrings(es), Message: fmt.Sprintf("session %s started: %s%s%s", ss.Info.Name, req.Argv[0], w.Note, sandbox.StartedNote(hid))})
	close(ss.started)
	go ss.Wait()
	return ss, nil
}

// drop undoes a session whose command did not start: its datapath, its
// registration, the front door's records.
func (sv *Service) drop(ss *Session) {
	if ss.docker != nil {
		_ = ss.docker.stop()
	}
	_ = ss.es.Close()
	ss.readers.Wait()
	sv.forget(ss)
	if ss.h.Dropped != nil {
		ss.h.Dropped(ss)
	}
}

func (sv *Service) register(ss *Session) {
	sv.mu.Lock()
	sv.sessions[ss.Info.Name] = ss
	sv.mu.Unlock()
}

func (sv *Service) forget(ss *Session) {
	sv.mu.Lock()
	if sv.sessions[ss.Info.Name] == ss {
		delete(sv.sessions, ss.Info.Name)
	}
	sv.mu.Unlock()
}

// Lookup is the running session named name, or nil.
func (sv *Service) Lookup(name string) *Session {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.sessions[name]
}

// PolicyStrings is the session's policy as entry strings, for
// session_started.
func PolicyStrings(es *enforcer.Session) []string {
	var out []string
	for _, e := range es.Policy().Entries() {
		out = append(out, e.String())
	}
	return out
}
