// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/namecheck"
	"github.com/sluice-dev/sluice/proxy"
	"github.com/sluice-dev/sluice/sandbox"
)

// Config says where sluice keeps its objects. The zero value is filled in
// with the defaults by Open.
type Config struct {
	CgroupName string // child of the cgroup2 mount; default "sluice"
	PinDir     string // bpffs directory; default loader.DefaultPinDir
	StateDir   string // session lock files; default "/run/sluice"
}

// WithDefaults fills in the default instance's values for empty fields.
func (c Config) WithDefaults() Config {
	if c.CgroupName == "" {
		c.CgroupName = "sluice"
	}
	if c.PinDir == "" {
		c.PinDir = loader.DefaultPinDir
	}
	if c.StateDir == "" {
		c.StateDir = "/run/sluice"
	}
	return c
}

func (c Config) sessionDir() string { return filepath.Join(c.StateDir, "sessions") }

// Enforcer is an open handle on the machine's sluice objects.
type Enforcer struct {
	cfg  Config
	root *cgroups.Root
	dp   *loader.Datapath
	kdns kdnsServer // answers what the kernel DNS path hands over
}

// Open prepares the sluice cgroup root and the datapath (loading, pinning
// and attaching it, or re-opening the pins), then reclaims sessions left by
// owners that died.
func Open(cfg Config) (*Enforcer, error) {
	cfg = cfg.WithDefaults()
	if err := os.MkdirAll(cfg.sessionDir(), 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	root, err := openRoot(cfg.CgroupName, true)
	if err != nil {
		return nil, fmt.Errorf("open sluice cgroup: %w", err)
	}
	dp, err := loader.Open(cfg.PinDir, root.Path())
	if err != nil {
		return nil, err
	}
	e := &Enforcer{cfg: cfg, root: root, dp: dp}
	e.Reclaim()
	return e, nil
}

// Close releases this process's handles. Sessions stay confined.
func (e *Enforcer) Close() error { return e.dp.Close() }

// StateDir is where this instance keeps its state (session locks, the
// sessions' Docker sockets).
func (e *Enforcer) StateDir() string { return e.cfg.StateDir }

// Root is the sluice cgroup root.
func (e *Enforcer) Root() *cgroups.Root { return e.root }

// Datapath is the open datapath.
func (e *Enforcer) Datapath() *loader.Datapath { return e.dp }

// Options describe a session.
type Options struct {
	Policy    *allowlist.Policy
	Audit     bool  // allow everything, report what would be denied
	PidsMax   int64 // 0: no limit
	MemoryMax int64 // 0: no limit
	// DNS starts the session's resolver and redirects its DNS traffic
	// there; nil leaves port 53 to be judged like any other port.
	DNS *DNSOptions
	// Proxy starts the session's allowlist proxy; nil: no proxy.
	Proxy *ProxyOptions
	// Verify configures the session's name verifier, which every session
	// with DNS has (verify_linux.go); nil: it reports to nobody.
	Verify *VerifyOptions
	// SharedEvents sends the session's deny events to the datapath's global
	// ring buffer (a daemon reads them all there) instead of a ring buffer
	// of its own, which costs two RCU grace periods per session.
	SharedEvents bool
	// NetNS, when set, is the network namespace the session's processes
	// use (a container's): the resolver and the proxy listen on its
	// loopback, where the datapath sends their DNS and they find the
	// proxy. Upstream queries and proxied connections still leave from
	// the enforcer's own namespace; the name verifier's connections leave
	// from NetNS, since they stand in for the program's own.
	NetNS *os.File
	// UnixSockets are unix sockets the session may reach besides its
	// policy's and the built-in list (BuiltinUnixSockets): the daemon's
	// API socket.
	UnixSockets []string
}

// Session is a running confined session owned by this process.
type Session struct {
	mu        sync.Mutex
	policy    *allowlist.Policy
	e         *Enforcer
	cg        *cgroups.Session
	lock      *os.File
	events    *ringbuf.Reader
	cfg       loader.SessionConfig
	resolver  *dnsresolver.Resolver
	proxy     *proxy.Proxy
	proxyAddr netip.AddrPort
	proxyErr  error // Adopt: why the proxy could not be restarted
	// verifier judges the names of connections to learned addresses;
	// verifyPorts are its loopback ports (IPv4, then IPv6 if any).
	verifier    *namecheck.Verifier
	verifyPorts []uint16
	verifyDial  *nsDialer // dials from netns (nil: from ours)
	adopted     bool
	attached    bool // AttachSession: the cgroup is someone else's (a container's)
	pod         bool // AttachPod: the datapath is attached at the cgroup itself
	closed      bool
	// release: Close leaves the cgroup and its processes alone (a failed
	// AttachSession: the cgroup is the engine's, its container starting).
	release bool
	netns   *os.File // AttachSession: where the listeners live; nil: ours
	// registered: the session's entry is in the datapath (SetSession
	// applies to it from then on).
	registered bool
	// unixExtra are unix sockets allowed beside the policy (built-in
	// list, API socket); unixNames every exact name in the datapath.
	unixExtra, unixNames []string
	// envSockets are the built-in names the command's environment chose
	// and the session was given (EnvUnixSockets).
	envSockets []string
	// own caches the abstract names found to be the session's own
	// (ResolveScoped).
	own ownAbstract
	// ownDir is the session's own socket directory (sandbox.Spec.OwnDir),
	// whose every clean name the datapath allows; "" when it has none.
	ownDir string
	// loopbackStrict: the session was in loopback "session" mode at some
	// point, so it may have loopback port entries to remove.
	loopbackStrict bool
	// The kernel DNS path (kdns_linux.go): its configuration when the
	// session is on it, its own ring buffer, and why it is not when it
	// was asked for.
	// ports are the session's port rules in the datapath (ports_linux.go).
	ports      *portTable
	kdnsCfg    *loader.KDNSConfig
	kdnsEvents *ringbuf.Reader
	kdnsErr    error
	kdnsStop   chan struct{}
	beatDone   chan struct{} // closed when the failover's beat has stopped (nil: none)
	// Ask mode's approved names (approve_linux.go), under mu: approved,
	// namePolicy (the policy with them, what the name checks judge by;
	// nil: the policy alone), the timer of the next expiry, and
	// namesDone once Close began (no name is written after).
	approved      approvals
	namePolicy    *allowlist.Policy
	approvalTimer *time.Timer
	namesDone     bool
}

// NewSession creates the session's cgroup, writes its policy into the
// datapath and applies its limits. The caller must Close it.
func (e *Enforcer) NewSession(opts Options) (*Session, error) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := e.root.SessionName(fmt.Sprintf("run-%d-%s", os.Getpid(), hex.EncodeToString(rnd[:])))

	lock, err := os.OpenFile(filepath.Join(e.cfg.sessionDir(), name+".lock"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create session lock: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("lock session %s: %w", name, err)
	}
	s := &Session{e: e, lock: lock, policy: opts.Policy}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if s.cg, err = e.root.NewSession(name); err != nil {
		return nil, fmt.Errorf("create session cgroup: %w", err)
	}
	if err := s.configure(opts); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// AttachSession makes the existing cgroup name, a child of the sluice
// root that someone else created (a container engine given the root as its
// cgroup parent), a session: until now the datapath refused its every
// connection as belonging to no session; from now on it gets opts.Policy.
// With opts.NetNS its resolver and proxy listen in that network
// namespace, the one its processes use. Close removes the session's
// datapath entries, and its cgroup if it is empty.
func (e *Enforcer) AttachSession(name string, opts Options) (*Session, error) {
	lock, err := os.OpenFile(filepath.Join(e.cfg.sessionDir(), name+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create session lock: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("lock session %s: %w", name, err)
	}
	s := &Session{e: e, lock: lock, policy: opts.Policy, attached: true}
	if s.cg, err = e.root.Session(name); err != nil {
		lock.Close()
		return nil, err
	}
	if err := s.configure(opts); err != nil {
		// The cgroup and its processes are the engine's: a failed attach
		// undoes only what sluice added. The container stays under the
		// root's programs, which refuse a cgroup with no session entry,
		// until an attach succeeds.
		s.release = true
		s.Close()
		return nil, err
	}
	return s, nil
}

// configure writes a new session's policy into the datapath, starts its
// resolver and proxy, and applies its limits.
func (s *Session) configure(opts Options) error {
	e := s.e
	s.netns = opts.NetNS
	if opts.Audit {
		s.cfg.Flags |= loader.FlagAudit
	}
	id := s.cg.ID()
	s.ports = newPortTable(e.dp, id)
	if on, err := s.ports.setPolicy(opts.Policy); err != nil {
		return err
	} else if on {
		s.cfg.Flags |= loader.FlagPortRules
	}
	if opts.Policy != nil {
		if err := e.dp.AddCIDRs(id, opts.Policy.Prefixes()); err != nil {
			return err
		}
	}
	s.unixExtra = slices.Clone(opts.UnixSockets)
	if err := s.applyLocal(opts.Policy.Local()); err != nil {
		return err
	}
	if opts.SharedEvents {
		if err := e.dp.AddSessionShared(id, s.cfg); err != nil {
			return err
		}
	} else {
		var err error
		if s.events, err = e.dp.AddSession(id, s.cfg); err != nil {
			return err
		}
	}
	s.registered = true
	if opts.DNS != nil {
		if err := s.startResolver(opts); err != nil {
			return err
		}
		if err := s.registerListeners(); err != nil {
			return err
		}
		if err := s.startVerifier(opts); err != nil {
			return err
		}
	}
	if opts.Proxy != nil {
		if err := s.startProxy(opts); err != nil {
			return err
		}
	}
	if opts.PidsMax > 0 {
		if err := s.cg.SetPidsMax(opts.PidsMax); err != nil {
			return fmt.Errorf("the session's pids limit: %w", err)
		}
	}
	if opts.MemoryMax > 0 {
		if err := s.cg.SetMemoryMax(opts.MemoryMax); err != nil {
			return fmt.Errorf("the session's memory limit: %w", err)
		}
	}
	return nil
}

// Name is the session's name (its cgroup's name).
func (s *Session) Name() string { return s.cg.Name() }

// ID is the session's cgroup id, its key in the datapath.
func (s *Session) ID() uint64 { return s.cg.ID() }

// Path is the session's cgroup directory.
func (s *Session) Path() string { return s.cg.Path() }

// Start builds the command spec describes (command.go) and spawns it into
// the session as spec.User, after verifying that the datapath is in force
// on the session's cgroup. It is the one way a session's command starts,
// for the embedded enforcer and the daemon alike. As with exec.Cmd.Start,
// the caller must Wait for the returned command.
func (s *Session) Start(spec CommandSpec) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find sluice's own binary: %w", err)
	}
	envSockets, outside := WithinEnvSockets(EnvUnixSockets(spec.Env), spec.EnvSocketsWithin)
	for _, n := range outside {
		if spec.Sandbox.OnSocketDropped != nil {
			spec.Sandbox.OnSocketDropped(n, "a session started from inside another one gets only the $SSH_AUTH_SOCK and $GNUPGHOME sockets its parent session was given")
		}
	}
	builtins := append(fixedUnixSockets(spec.User.UID), envSockets...)
	// The session's own sockets: a private directory only it can fill,
	// given where the datapath judges unix sockets and the session cannot
	// mount (a mount over the directory would redirect its names).
	own := ""
	if s.e.dp.UnixJudging() == nil && (!spec.Sandbox.ShareProcesses || !spec.Sandbox.AllowUserNamespaces) {
		own = OwnDir(s.ID())
		spec.Env = append(slices.Clip(spec.Env), "TMPDIR="+own)
	}
	s.mu.Lock()
	s.ownDir = own
	s.mu.Unlock()
	if err := s.allowUnixExtra(builtins); err != nil {
		return nil, err
	}
	// Abstract unix sockets have one judge. The Landlock scope (ABI 6)
	// lets the session reach exactly the ones it made and refuses every
	// one made outside it: it judges wherever the session has a Landlock
	// domain with scopes, and the datapath then allows unlisted abstract
	// names (FlagOwnAbstract). The datapath alone judges them where the
	// scope is missing (--share-processes, a kernel before 6.12), where
	// unix_sockets lists one (an outside socket the scope would refuse),
	// and in audit mode (which must refuse nothing); the session's own
	// abstract sockets are then refused as any unlisted name.
	if s.e.dp.UnixJudging() == nil {
		if err := s.judgeAbstract(spec); err != nil {
			return nil, err
		}
		spec.Sandbox.AbstractUnix = s.cfg.Flags&loader.FlagOwnAbstract == 0
	}
	// Names are judged, and the kernel follows them afterwards: the
	// sandbox holds each allowed name to the socket it names now. A
	// built-in name it cannot hold (absent, or a symlink the user could
	// replace) is not allowed: the session could make it lead to any
	// socket. Names the allowlist lists are the user's choice and stay.
	var dropped []string
	onSocket := func(name string, held bool, why string) {
		if held || !slices.Contains(builtins, name) {
			return
		}
		dropped = append(dropped, name)
		if spec.Sandbox.OnSocketDropped != nil && !strings.HasPrefix(why, "it does not exist") {
			spec.Sandbox.OnSocketDropped(name, why)
		}
	}
	sockets := slices.Clone(builtins)
	for _, u := range s.Policy().Local().UnixSockets {
		if !allowlist.UnixGlob(u) {
			sockets = append(sockets, u)
		}
	}
	build, err := spec.sandboxPrepare(sockets, onSocket, own)
	if err != nil {
		return nil, err
	}
	if spec.Sandbox.NamespacesOf != nil {
		// The shim is exec'd in the caller's mount namespace, where the
		// path of sluice's binary is the caller's to fill: exec this very
		// binary through a descriptor instead (close-on-exec: the kernel
		// has opened the file before it closes the descriptor). At 10 or
		// above, clear of the descriptors the child is given.
		bin, err := os.Open(self)
		if err != nil {
			return nil, fmt.Errorf("open sluice's own binary: %w", err)
		}
		defer bin.Close()
		fd, err := unix.FcntlInt(bin.Fd(), unix.F_DUPFD_CLOEXEC, 10)
		if err != nil {
			return nil, fmt.Errorf("duplicate sluice's own binary: %w", err)
		}
		defer unix.Close(fd)
		self = fmt.Sprintf("/proc/self/fd/%d", fd)
	}
	// Runs on the spawning thread before the command is cloned: a name
	// is revoked before anything could connect to it.
	prepare := func() error {
		if err := build(); err != nil {
			return err
		}
		return s.dropUnixExtra(dropped)
	}
	cmd, err := startCommand(sessionSpawner{s: s, prepare: prepare}, spec, self, s.Name(), s.ProxyEnv())
	if err != nil {
		return nil, err
	}
	// prepare has run: what was dropped is known.
	s.mu.Lock()
	s.envSockets = slices.DeleteFunc(slices.Clone(envSockets), func(n string) bool { return slices.Contains(dropped, n) })
	s.mu.Unlock()
	return cmd, nil
}

// EnvUnixSockets are the built-in unix sockets that the command's
// environment chose (EnvUnixSockets) and that the session was given: the
// bound of the sessions started from inside it (CommandSpec.EnvSocketsWithin).
// Empty before Start, and for an adopted session (whose owner keeps the
// list on record).
func (s *Session) EnvUnixSockets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.envSockets)
}

// judgeAbstract sets FlagOwnAbstract on the session when its abstract unix
// sockets can be left to the Landlock scope (see Start).
func (s *Session) judgeAbstract(spec CommandSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	own := !spec.Sandbox.ShareProcesses && sandbox.LandlockABI() >= 6 && s.cfg.Flags&loader.FlagAudit == 0
	if s.policy != nil {
		for _, u := range s.policy.Local().UnixSockets {
			if strings.HasPrefix(u, "@") {
				own = false
			}
		}
	}
	cfg := s.cfg
	if own {
		cfg.Flags |= loader.FlagOwnAbstract
	} else {
		cfg.Flags &^= loader.FlagOwnAbstract
	}
	if cfg != s.cfg && s.registered {
		if err := s.e.dp.SetSession(s.ID(), cfg); err != nil {
			return err
		}
	}
	s.cfg = cfg
	return nil
}

// OwnDir is the own socket and temporary directory of the session whose
// cgroup id is id (sandbox.Spec.OwnDir): its TMPDIR.
func OwnDir(id uint64) string {
	return filepath.Join(sandbox.OwnDirRoot, strconv.FormatUint(id, 10))
}

// Spawn verifies that the datapath is in force on the session's cgroup and
// spawns cmd into it as it is, as user: without the shim, the session's
// variables or anything else Start adds. It is the primitive under Start,
// exported for benchmarks that time the datapath alone; commands that
// users run start through Start.
func (s *Session) Spawn(cmd *exec.Cmd, user cgroups.SpawnOptions) error {
	p := sessionSpawner{s: s}
	if err := p.Verify(); err != nil {
		return fmt.Errorf("refusing to start the command: %w", err)
	}
	return p.Spawn(cmd, user)
}

// SpawnWith is Spawn with a step of the caller's: prepare runs as root on
// the thread that then clones the command, just before the clone
// (cgroups.Session.StartWith), so that per-thread state it sets up (a
// network or mount namespace the command is born in) reaches the command
// and nothing else. Like Spawn it is for benchmarks and tests that place a
// command in a world of their own.
func (s *Session) SpawnWith(cmd *exec.Cmd, user cgroups.SpawnOptions, prepare func() error) error {
	p := sessionSpawner{s: s, prepare: prepare}
	if err := p.Verify(); err != nil {
		return fmt.Errorf("refusing to start the command: %w", err)
	}
	return p.Spawn(cmd, user)
}

// sessionSpawner is the real spawner: the pinned datapath and the
// session's cgroup; prepare, when set, builds the sandbox on the spawning
// thread.
type sessionSpawner struct {
	s       *Session
	prepare func() error
}

func (p sessionSpawner) Verify() error { return p.s.e.dp.Verify(p.s.cg.Path()) }

func (p sessionSpawner) Spawn(cmd *exec.Cmd, user cgroups.SpawnOptions) error {
	return p.s.cg.StartWith(cmd, user, p.prepare)
}

// ErrBadEvent marks a ring buffer record that could not be decoded; the
// reader may go on.
var ErrBadEvent = errors.New("bad event record")

// ReadEvent blocks for the session's next deny event (a Scoped event
// counts only when ResolveScoped says it was a refusal). After FlushEvents it
// returns the events still pending, then ringbuf.ErrFlushed; after Close,
// ringbuf.ErrClosed.
func (s *Session) ReadEvent() (loader.Event, error) {
	if s.events == nil {
		return loader.Event{}, ringbuf.ErrClosed
	}
	for {
		rec, err := s.events.Read()
		if err != nil {
			return loader.Event{}, err
		}
		ev, err := loader.ParseEvent(rec.RawSample)
		if err != nil {
			return ev, fmt.Errorf("%w: %w", ErrBadEvent, err)
		}
		if ev, report := s.ResolveScoped(ev); report {
			return ev, nil
		}
	}
}

// FlushEvents wakes ReadEvent so that the reader drains what is pending
// and stops: the command is gone and its denials are all in the buffer.
func (s *Session) FlushEvents() error {
	if s.events == nil {
		return nil
	}
	return s.events.Flush()
}

// Counters are the session's decision counters.
func (s *Session) Counters() (loader.Counters, error) { return s.e.dp.Counters(s.cg.ID()) }

// Kill kills every process left in the session.
func (s *Session) Kill() error {
	if s.replaced() {
		return nil // another cgroup by the same name: not this session's
	}
	return s.cg.Kill()
}

// replaced reports whether an attached session's cgroup is gone, or has
// been replaced by another of the same name (a restarted container gets
// its cgroup back under the same path at once). Paths are then no longer
// this session's: it must not kill, wait on or remove through them.
// Sessions this package names (run-*) are never replaced.
func (s *Session) replaced() bool {
	if !s.attached || s.cg == nil {
		return false
	}
	var st unix.Stat_t
	return unix.Stat(s.cg.Path(), &st) != nil || st.Ino != s.cg.ID()
}

// Close kills what is left in the session and removes its cgroup, its
// datapath entries and its lock file.
func (s *Session) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.endApprovals()
	var errs []error
	if s.cg != nil {
		s.e.kdns.remove(s.cg.ID())
	}
	if s.kdnsStop != nil {
		close(s.kdnsStop)
	}
	if s.beatDone != nil {
		<-s.beatDone // within one probe: no beat lands after the entry is removed
	}
	if s.kdnsEvents != nil {
		s.kdnsEvents.Close()
	}
	if s.resolver != nil {
		s.resolver.Close()
	}
	if s.verifier != nil {
		s.verifier.Close()
	}
	if s.verifyDial != nil {
		s.verifyDial.close()
	}
	if s.proxy != nil {
		_ = s.proxy.Close()
	}
	if s.cg != nil {
		if s.replaced() {
			// Nothing to remove: the path is another cgroup's now.
		} else if s.release {
			// Not this session's to kill or remove (AttachSession).
		} else if err := s.cg.Remove(5 * time.Second); err != nil {
			errs = append(errs, err)
		}
		// A session this process built knows what it put into the
		// datapath; an adopted one may hold entries of an older policy:
		// scan.
		var known *loader.Known
		if !s.adopted {
			known = &loader.Known{Ring: s.events != nil, Unix: s.unixNames, LoopbackSession: s.loopbackStrict}
			if s.policy != nil {
				known.Prefixes = s.policy.Prefixes()
			}
			for _, p := range append([]uint16{s.cfg.DNSPort4, s.cfg.DNSPort6, s.proxyAddr.Port()}, s.verifyPorts...) {
				if p != 0 {
					known.Ports = append(known.Ports, p)
				}
			}
		}
		if err := s.e.dp.RemoveSession(s.cg.ID(), known); err != nil {
			errs = append(errs, err)
		}
		if s.pod {
			if err := s.closePod(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if s.events != nil {
		s.events.Close()
	}
	if s.ownDir != "" {
		if err := sandbox.RemoveOwnDir(s.ownDir); err != nil {
			errs = append(errs, err)
		}
	}
	if s.lock != nil {
		os.Remove(s.lock.Name())
		s.lock.Close()
	}
	return errors.Join(errs...)
}

// Reclaim removes sessions whose owner is gone and whose cgroup is empty,
// and datapath entries whose cgroup no longer exists. Sessions with live
// processes are left alone: they stay confined until `sluice cleanup`.
func (e *Enforcer) Reclaim() []error {
	var errs []error
	live := map[uint64]bool{}
	sessions, err := e.root.Sessions()
	if err != nil {
		return []error{err}
	}
	for _, cg := range sessions {
		live[cg.ID()] = true
		lockPath := filepath.Join(e.cfg.sessionDir(), cg.Name()+".lock")
		if held(lockPath) {
			continue
		}
		// No lock file: not a session sluice made or attached, but e.g. a
		// container's cgroup that its engine has just created under the
		// root (its processes are on their way in): not ours to remove.
		if _, err := os.Stat(lockPath); err != nil {
			continue
		}
		if pop, err := cg.Populated(); err != nil || pop {
			continue
		}
		if err := cg.Remove(time.Second); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(live, cg.ID())
		if err := e.dp.RemoveSession(cg.ID(), nil); err != nil {
			errs = append(errs, err)
		}
		if err := sandbox.RemoveOwnDir(OwnDir(cg.ID())); err != nil {
			errs = append(errs, err)
		}
		os.Remove(lockPath)
	}
	ids, err := e.dp.Sessions()
	if err != nil {
		return append(errs, err)
	}
	for _, id := range ids {
		if !live[id] {
			if err := e.dp.RemoveSession(id, nil); err != nil {
				errs = append(errs, err)
			}
			// Its cgroup is gone, so is every process that had the mount.
			if err := sandbox.RemoveOwnDir(OwnDir(id)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// SessionOwned reports whether a live process owns the session called
// name: holds its lock, which goes with the process however it ends.
func (e *Enforcer) SessionOwned(name string) bool {
	return held(filepath.Join(e.cfg.sessionDir(), name+".lock"))
}

// held reports whether a live process holds the lock at path.
func held(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return true
	}
	return false
}

// Cleanup removes everything sluice put on the machine: it kills every
// session's processes, removes their cgroups and the sluice cgroup, unpins
// the datapath (detaching the programs) and removes the state directory.
// It works without a loadable datapath, so it can clean up after any
// version.
func Cleanup(cfg Config) error {
	cfg = cfg.WithDefaults()
	var errs []error
	if root, err := OpenExistingRoot(cfg.CgroupName); err == nil {
		sessions, err := root.Sessions()
		if err != nil {
			errs = append(errs, err)
		}
		for _, s := range sessions {
			if err := s.Remove(5 * time.Second); err != nil {
				errs = append(errs, err)
				continue
			}
			// Its processes are gone, and with them the directory's mount.
			if err := sandbox.RemoveOwnDir(OwnDir(s.ID())); err != nil {
				errs = append(errs, err)
			}
		}
		if err := root.Remove(); err != nil {
			errs = append(errs, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, cgroups.ErrNoCgroup2) {
		// Without cgroup2 there is no sluice cgroup to remove; pins and
		// state files may still be left.
		errs = append(errs, err)
	}
	if err := loader.Remove(cfg.PinDir); err != nil {
		errs = append(errs, err)
	}
	// Session locks, and the daemon's session records beside them.
	for _, dir := range []string{cfg.sessionDir(), filepath.Join(cfg.StateDir, "daemon")} {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if entries, err := os.ReadDir(cfg.StateDir); err == nil && len(entries) == 0 {
		os.Remove(cfg.StateDir)
	}
	return errors.Join(errs...)
}

// OpenExistingRoot opens the sluice cgroup root only if it exists, so that
// read-only commands and cleanup never create one. It returns an error
// wrapping os.ErrNotExist when there is none.
func OpenExistingRoot(name string) (*cgroups.Root, error) {
	if SystemdScopes() {
		return openRoot(name, false)
	}
	mount, err := cgroups.Mount()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(mount, name)); err != nil {
		return nil, fmt.Errorf("sluice cgroup: %w", err)
	}
	return cgroups.OpenRoot(name)
}
