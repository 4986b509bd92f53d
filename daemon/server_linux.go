// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/callerns"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/prompts"
	"github.com/sluice-dev/sluice/sandbox"
	"github.com/sluice-dev/sluice/sessions"
)

// Config configures the daemon. Empty fields take the defaults.
type Config struct {
	AllowlistPath string // default /etc/sluice/network_allowlist.json
	SocketPath    string // default /run/sluice/sluice.sock
	// SocketMode is the API socket's mode; 0: 0660 with the session
	// group as its group when that group exists, else 0600 (socket_linux.go).
	SocketMode   os.FileMode
	StateDir     string   // default /run/sluice
	Upstreams    []string // default: the host's resolv.conf
	AuditLog     string   // "" = no file (events still stream)
	MetricsAddr  string   // "" = off; must be a loopback address
	SessionGroup string   // members may create sessions (default "sluice", ignored if absent)
	AdminGroup   string   // members may change the machine allowlist ("" = root only)
	// ContainerCallers are the callers in other namespaces (a container
	// with the socket bind-mounted) whose sessions run in their own
	// namespaces: rules uid:N, gid:N, cgroup:GLOB (package callerns).
	// None: such callers are refused.
	ContainerCallers []string
	// ReadOnlyPaths are made read-only, with everything below them, in
	// every session's mount namespace (sandbox.ReadOnly): absolute, clean
	// paths; a session may add more, never remove one.
	ReadOnlyPaths []string
	// ContainerPolicies are the named policies a container selects with
	// the label sluice.policy=NAME: name -> allowlist file
	// (containerpolicy_linux.go).
	ContainerPolicies map[string]string
	// PodPolicies is the directory of a node agent's pod policies, the
	// mounted ConfigMap (package podpolicy); "" for a daemon that
	// confines no pods (pods_linux.go).
	PodPolicies string
	// PodGuardFile is where a node agent keeps the copy of its guard the
	// fail-closed hook reads (podpolicy.DefaultGuardFile when empty).
	PodGuardFile string
	Version      string
	// AskTimeout is how long a prompt waits before it is denied
	// (prompts.DefaultTimeout, five minutes, when zero); only tests
	// shorten it (the hidden --ask-timeout flag).
	AskTimeout    time.Duration
	AskMaxPending int                 // per session (prompts.DefaultMaxPerSession when zero)
	Log           io.Writer           // the daemon's log (stderr), for what an operator must hear of; nil: none
	DNS           enforcer.DNSOptions // TTL bounds etc.; Upstreams comes from the field above
	// Enforcer overrides the instance (tests); zero: SLUICE_INSTANCE or the default.
	Enforcer enforcer.Config
}

// Defaults.
const (
	DefaultAllowlist = "/etc/sluice/network_allowlist.json"
	maxBody          = 1 << 20
)

// Time bounds of an API connection (docs/api.md, Conventions).
const (
	readHeaderTimeout = 10 * time.Second // from the connection or the previous request
	readTimeout       = 20 * time.Second // the whole request, headers and body
	idleTimeout       = 15 * time.Second // between two requests on a keep-alive connection
)

// Server is the running daemon.
type Server struct {
	cfg     Config
	e       *enforcer.Enforcer
	machine atomic.Pointer[allowlist.Policy]
	audit   *audit.Log
	hub     *hub
	metrics *metrics
	// refusals limits the API's refusal lines (session_refused,
	// policy_change_refused): a confined agent can repeat a refused
	// request in a loop as it can a refused connect.
	refusals *audit.Limiter

	ctr  containerState // container sessions (containers_linux.go)
	pods podState       // pod sessions, a node agent's (pods_linux.go)

	sessionGID, adminGID     uint32
	containerCallers         callerns.Rules
	hasSessionGID, hasAdmGID bool

	mu       sync.Mutex
	allowMu  sync.Mutex // serialises read-modify-write of the allowlist file
	adoptMu  sync.Mutex // one adoption of a running process at a time (adopt_linux.go)
	sessions map[string]*session
	ended    endedSessions             // for clients that reattach after a restart
	orphans  map[string]*audit.Limiter // rate limits of sessions no daemon owns, by name (their programs flood too)
	stop     chan struct{}
	wg       sync.WaitGroup

	// svc runs the sessions (package sessions); the daemon is its API.
	svc *sessions.Service
	// prompts is ask mode's table of pending prompts (prompts_linux.go).
	prompts *prompts.Table

	global  *ringbuf.Reader // the datapath's global ring buffer
	flushed chan struct{}   // the reader drained up to a Flush
	drainMu sync.Mutex

	api, metricsSrv *http.Server
	ln              net.Listener
	sockStat        unix.Stat_t // the API socket listenAPI made
	fileStamp       fileStamp
}

// New opens the datapath and the machine allowlist and re-adopts the
// sessions a previous daemon left running. It does not serve yet.
func New(cfg Config) (*Server, error) {
	if cfg.AllowlistPath == "" {
		cfg.AllowlistPath = DefaultAllowlist
	}
	if cfg.SocketPath == "" {
		cfg.SocketPath = api.DefaultSocket
	}
	ecfg := cfg.Enforcer
	if cfg.StateDir != "" {
		ecfg.StateDir = cfg.StateDir
	}
	ecfg = ecfg.WithDefaults()
	cfg.StateDir = ecfg.StateDir
	if cfg.SessionGroup == "" {
		cfg.SessionGroup = "sluice"
	}
	s := &Server{cfg: cfg, hub: newHub(), refusals: audit.NewLimiter(), orphans: map[string]*audit.Limiter{}, sessions: map[string]*session{}, stop: make(chan struct{}), flushed: make(chan struct{}, 1)}
	s.sessionGID, s.hasSessionGID = lookupGroup(cfg.SessionGroup)
	s.adminGID, s.hasAdmGID = lookupGroup(cfg.AdminGroup)
	if cfg.SocketMode != 0 {
		if err := CheckSocketMode(cfg.SocketMode); err != nil {
			return nil, fmt.Errorf("the API socket's mode: %w", err)
		}
	}
	if mode, _ := socketPerm(cfg.SocketMode, s.sessionGID, s.hasSessionGID); s.hasAdmGID && s.adminGID != s.sessionGID && mode&0o006 == 0 {
		s.logf("note: the API socket is mode %#o for group %q: members of the admin group %q outside it cannot connect (add them to %q, or pass --socket-mode 0666)", uint32(mode), cfg.SessionGroup, cfg.AdminGroup, cfg.SessionGroup)
	}
	rules, rerr := callerns.ParseRules(cfg.ContainerCallers)
	if rerr != nil {
		return nil, rerr
	}
	s.containerCallers = rules
	ro, err := sandbox.ReadOnlyPaths(cfg.ReadOnlyPaths, nil)
	if err != nil {
		return nil, fmt.Errorf("the machine's read-only paths: %w", err)
	}
	s.cfg.ReadOnlyPaths = ro.Machine
	for _, p := range ro.Machine {
		if _, err := os.Lstat(p); err != nil {
			// Sessions see their callers' file systems, not this one:
			// each decides for itself (sandbox.ReadOnly).
			s.logf("note: read-only path %s: %v here; a session whose view lacks it starts without it only where its user could not create it", p, err)
		}
	}

	policy, err := loadPolicyFile(cfg.AllowlistPath)
	if errors.Is(err, os.ErrNotExist) {
		policy, err = allowlist.New(nil)
	}
	if err != nil {
		return nil, err
	}
	s.machine.Store(policy)
	s.fileStamp = stampOf(cfg.AllowlistPath)
	if s.ctr.policies, err = loadContainerPolicies(cfg.ContainerPolicies); err != nil {
		return nil, err
	}
	if s.audit, err = audit.OpenLog(cfg.AuditLog); err != nil {
		return nil, err
	}
	if s.e, err = enforcer.Open(ecfg); err != nil {
		s.audit.Close()
		return nil, err
	}
	if r := s.e.Datapath().Replaced(); len(r) > 0 {
		s.logf("datapath: replaced the pinned maps %s, left with another layout by an older sluice; sessions re-adopted now learn their addresses again at their next lookups", strings.Join(r, ", "))
	}
	s.metrics = newMetrics(s)
	s.prompts = prompts.New(prompts.Config{Timeout: cfg.AskTimeout, MaxPerSession: cfg.AskMaxPending})
	s.svc = sessions.NewService(s.e, sessions.Config{DNS: s.dnsOptions(), UnixSockets: []string{cfg.SocketPath},
		SharedEvents: true, Drain: s.drainEvents, Stop: s.stop, Logf: s.logf, Prompts: s.prompts, Docker: true,
		OnPermission:    func(typ string) { s.metrics.permissions.WithLabelValues(typ).Inc() },
		OnSandboxDenied: func(access string) { s.metrics.sandbox.WithLabelValues(access).Inc() }})
	if err := os.MkdirAll(s.stateDir(), 0o700); err != nil {
		return nil, fmt.Errorf("create daemon state directory: %w", err)
	}
	s.emit(audit.Event{Type: audit.DaemonStarted, Message: fmt.Sprintf("sluice daemon %s started, allowlist %s (%d entries)", cfg.Version, cfg.AllowlistPath, policy.Len())})
	if cfg.PodPolicies != "" {
		if err := s.startPods(); err != nil {
			s.e.Close()
			s.audit.Close()
			return nil, err
		}
	}
	s.adoptAll()
	// Running containers too, before any waiting event is read, so that
	// their denials while no daemon ran are told as theirs.
	s.startContainers()
	s.sweepAdoptRecords()
	return s, nil
}

func lookupGroup(name string) (uint32, bool) {
	if name == "" {
		return 0, false
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		if id, err := strconv.ParseUint(name, 10, 32); err == nil {
			return uint32(id), true
		}
		return 0, false
	}
	id, err := strconv.ParseUint(g.Gid, 10, 32)
	return uint32(id), err == nil
}

func (s *Server) stateDir() string { return filepath.Join(s.cfg.StateDir, "daemon") }

// Serve listens on the API socket (and the metrics address) until ctx is
// done or Shutdown is called.
func (s *Server) Serve(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(s.cfg.SocketPath), 0o755); err != nil {
		return fmt.Errorf("create socket directory: %w", err)
	}
	// Who may connect at all (socket_linux.go); what a caller may do is
	// decided per request from its credentials.
	mode, gid := socketPerm(s.cfg.SocketMode, s.sessionGID, s.hasSessionGID)
	if w := socketDirWarning(s.cfg.SocketPath); w != "" {
		s.logf("warning: %s", w)
	}
	ul, st, err := listenAPI(s.cfg.SocketPath, gid, mode)
	if err != nil {
		return err
	}
	s.sockStat = st
	s.ln = listener{UnixListener: ul, limits: newConnLimits(maxConnsPerUID, maxConns)}
	s.api = &http.Server{
		Handler: s.guardFDs(s.routes()),
		// Every wait on a caller is bounded: the headers, the whole
		// request, and the pause between two requests on a keep-alive
		// connection. An answer is not: once a request is read, net/http
		// lifts the read deadline for its background read, so streams (a
		// session's, the events) run as long as they run.
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	errc := make(chan error, 2)
	go func() { errc <- s.api.Serve(s.ln) }()
	go s.watchContainers()
	if s.cfg.MetricsAddr != "" {
		ap, err := netip.ParseAddrPort(s.cfg.MetricsAddr)
		if err != nil || !ap.Addr().IsLoopback() {
			return fmt.Errorf("metrics address %q: want a loopback address and port, e.g. 127.0.0.1:9469", s.cfg.MetricsAddr)
		}
		ml, err := net.Listen("tcp", ap.String())
		if err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
		s.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { errc <- s.metricsSrv.Serve(ml) }()
	}
	s.wg.Go(s.watchAllowlist)
	s.svc.WatchSandbox()
	go func() {
		<-s.stop
		s.svc.Close()
	}()
	if gr, err := s.e.Datapath().GlobalEvents(); err == nil {
		// The daemon's sessions (and leftovers) deliver their deny events
		// to the global ring buffer; one reader dispatches them.
		s.global = gr
		go func() {
			<-s.stop
			gr.Close()
		}()
		go s.readGlobalEvents(gr)
	}
	// Ready: the API socket has been listening since listenAPI, so a
	// unit with Type=notify lets `systemctl start sluice && sluice run`
	// find it. Without systemd (no $NOTIFY_SOCKET) this does nothing; the
	// variable is unset either way, so no process the daemon starts
	// inherits it.
	if _, err := sddaemon.SdNotify(true, sddaemon.SdNotifyReady); err != nil {
		s.logf("warning: could not tell systemd the daemon is ready: %v", err)
	}
	select {
	case <-ctx.Done():
		return s.Shutdown()
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// Shutdown stops serving. Sessions keep running, confined; their commands
// are not killed and a restarted daemon adopts them.
func (s *Server) Shutdown() error {
	select {
	case <-s.stop:
		return nil
	default:
	}
	close(s.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if s.api != nil {
		_ = s.api.Shutdown(ctx)
		removeSocket(s.cfg.SocketPath, s.sockStat)
	}
	if s.metricsSrv != nil {
		_ = s.metricsSrv.Shutdown(ctx)
	}
	s.wg.Wait()
	if n := s.refusals.Flush(); n > 0 {
		s.emit(audit.SuppressedEvent("", n))
	}
	s.mu.Lock()
	orphans := maps.Clone(s.orphans)
	s.mu.Unlock()
	for name, l := range orphans {
		if n := l.Flush(); n > 0 {
			s.emit(audit.SuppressedEvent(name, n))
		}
	}
	// Pending prompts live in memory only: denied, and told, before the
	// daemon says it stopped (docs/ask.md).
	s.prompts.Close("daemon stopped")
	s.emit(audit.Event{Type: audit.DaemonStopped, Message: "sluice daemon stopped; running sessions stay confined"})
	// Sessions are left as they are: confined, recorded, their commands
	// running; the next daemon adopts them.
	s.e.Close()
	return s.audit.Close()
}

func (s *Server) readGlobalEvents(r *ringbuf.Reader) {
	for {
		rec, err := r.Read()
		if errors.Is(err, ringbuf.ErrFlushed) {
			select {
			case s.flushed <- struct{}{}:
			default:
			}
			continue
		}
		if err != nil {
			return
		}
		ev, err := loader.ParseEvent(rec.RawSample)
		if err != nil {
			continue
		}
		s.dispatch(ev)
	}
}

// dispatch hands a kernel event to its session, or logs it on its own.
//
// The global ring buffer carries the events of every cgroup in the sluice
// tree without a ring buffer of its own: the daemon's sessions, cgroups
// below one of them (a container runtime's, given the session as its
// cgroup parent: the datapath knows them by their own id and refuses them
// as "no session"), and sessions no daemon owns (a record that was lost or
// could not be adopted). Each line names the session the task is in,
// found from its cgroup; only a cgroup removed before its event was read
// leaves the line without one (docs/audit.md).
func (s *Server) dispatch(ev loader.Event) {
	owner := s.sessionByID(ev.Cgroup)
	name := ""
	if owner == nil {
		if n, err := s.e.Root().SessionOf(ev.Cgroup); err == nil {
			name = n
			s.mu.Lock()
			owner = s.sessions[n]
			s.mu.Unlock()
		}
	}
	if owner != nil {
		owner.KernelEvent(ev)
		return
	}
	// A container of a session's Docker socket is a session of the
	// service's own, which the daemon's table does not hold.
	if ss := s.svc.Lookup(name); name != "" && ss != nil {
		ss.KernelEvent(ev)
		return
	}
	if ev.Scoped {
		// Left to a Landlock scope, in a session no one here owns: whether
		// it was refused cannot be told (enforcer.Session.ResolveScoped).
		return
	}
	if name == "" || s.orphanAllowed(name) {
		s.emit(audit.FromKernel(name, ev, nil))
	}
}

// orphanAllowed applies the rate limit of a session no daemon owns to its
// next line, reporting what it suppressed. Lines without a session are not
// limited: their cgroup is gone, and with it the flood.
func (s *Server) orphanAllowed(name string) bool {
	s.mu.Lock()
	l := s.orphans[name]
	if l == nil {
		l = audit.NewLimiter()
		s.orphans[name] = l
	}
	s.mu.Unlock()
	ok, report := l.Allow(time.Now())
	if report > 0 {
		s.emit(audit.SuppressedEvent(name, report))
	}
	return ok
}

// sessionByID is the daemon's session whose cgroup has id, or nil.
func (s *Server) sessionByID(id uint64) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		if ss.Enforced().ID() == id {
			return ss
		}
	}
	return nil
}

// drainEvents returns once every event already in the global ring buffer
// has been dispatched: a session's command has exited, so all of its
// denials are in there, and its owner must hear of them before the exit.
func (s *Server) drainEvents() {
	if s.global == nil {
		return
	}
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	select { // a stale signal of a drain that timed out
	case <-s.flushed:
	default:
	}
	if s.global.Flush() != nil {
		return
	}
	select {
	case <-s.flushed:
	case <-time.After(time.Second):
	case <-s.stop:
	}
}

// logf writes a line to the daemon's log.
func (s *Server) logf(format string, args ...any) {
	if s.cfg.Log != nil {
		fmt.Fprintf(s.cfg.Log, "sluice daemon: "+format+"\n", args...)
	}
}

// ReopenAuditLog is what SIGHUP does.
func (s *Server) ReopenAuditLog() error { return s.audit.Reopen() }

// emit records an event: audit log, metrics, subscribers.
func (s *Server) emit(e audit.Event) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	s.audit.Write(e)
	if s.metrics != nil {
		s.metrics.events.WithLabelValues(e.Type).Inc()
	}
	s.hub.publish(e)
}

func (s *Server) snapshot() []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		out = append(out, ss)
	}
	return out
}
