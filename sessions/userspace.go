// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/proxy"
)

// The modes without BPF a Userspace session runs in, strongest first on
// each platform. The backends are in userspace/.
const (
	// ModeLandlock is Linux without BPF: Landlock TCP rules and seccomp
	// let the command connect only to the proxy's port (and its loopback
	// ports), through the `sluice __confine` shim (landlock.ShimName).
	ModeLandlock = "landlock"
	// ModeSeatbelt is macOS: a Seatbelt profile run by sandbox-exec allows
	// outbound network only to the proxy.
	ModeSeatbelt = "seatbelt"
	// ModeProxy is the proxy variables alone: programs that ignore them are
	// not contained.
	ModeProxy = "proxy"
)

// UserspaceConfig is one session of a mode without BPF.
type UserspaceConfig struct {
	// Mode is the backend asked for: ModeLandlock (Linux), ModeSeatbelt
	// (macOS) or ModeProxy. Elsewhere, or when the platform has no such
	// backend, the session runs in ModeProxy; Mode() says which.
	Mode string
	// Policy is what the proxy lets through.
	Policy *allowlist.Policy
	// DNS, when set, makes the proxy resolve allowed names through a sluice
	// resolver in this process, with this configuration (its Policy and
	// OnEvent are the session's): the same policy check, rebinding filter
	// and cache as a BPF session's resolver, without a listener or a
	// datapath to teach. Nil keeps the system's resolver, which honours
	// /etc/hosts and, on macOS, the system's per-domain DNS settings; there
	// is no session resolver in these modes for it to disagree with.
	DNS *dnsresolver.Config
	// LoopbackPorts are local TCP ports the command may also connect to
	// (landlock and seatbelt).
	LoopbackPorts []uint16
	// User is whom the command runs as in landlock mode when this process
	// is root (nil: as this process).
	User *cgroups.SpawnOptions
	// Argv is the command; Argv[0] is looked up in PATH.
	Argv []string
	// NoProxyEnv leaves the proxy variables out of the command's
	// environment: it can then reach only loopback.
	NoProxyEnv bool
	// Stdio are the command's stdin, stdout and stderr; ExtraFiles its
	// descriptors 3, 4, ...
	Stdio      [3]*os.File
	ExtraFiles []*os.File
	// OnEvent receives the session's refusals (the proxy's and the
	// resolver's) as audit events; nil: dropped.
	OnEvent func(audit.Event)
	// OnNote receives lines that report no decision (the proxy failing to
	// reach an allowed host); nil: dropped.
	OnNote func(string)
}

// UserspaceStarted is what a Userspace session says once its command
// runs.
type UserspaceStarted struct {
	// Name names the session: no cgroup does, so the mode and this
	// process's pid.
	Name string
	PID  int
	// UID is the uid the session is recorded under: this process's.
	UID uint32
	// Path is the program started: the command's, or in landlock mode
	// this binary (the shim that confines itself, then execs the command).
	Path string
	// Policy is the session's policy, one entry a string.
	Policy []string
}

// Userspace is a session of a mode without BPF: the allowlist proxy on
// loopback in this process, the command pointed at it and, where the
// platform has one, the backend that keeps a program ignoring the proxy
// variables from going around it.
type Userspace struct {
	cfg   UserspaceConfig
	name  string
	mode  string
	addr  netip.AddrPort
	proxy *proxy.Proxy
	res   *dnsresolver.Resolver
	cmd   *exec.Cmd
}

// StartUserspace starts the session's resolver and proxy and builds its
// command; Run starts the command. The caller closes the session.
func StartUserspace(cfg UserspaceConfig) (*Userspace, error) {
	if len(cfg.Argv) == 0 {
		return nil, failf(Invalid, "no command to run")
	}
	u := &Userspace{cfg: cfg, name: fmt.Sprintf("%s-%d", cfg.Mode, os.Getpid())}
	policy := cfg.Policy
	if cfg.DNS != nil {
		dc := *cfg.DNS
		dc.Policy = policy
		dc.OnEvent = u.dnsEvent
		r, err := dnsresolver.New(dc)
		if err != nil {
			return nil, wrapf(Invalid, err, "the session's resolver")
		}
		u.res = r
	}
	pc := proxy.Config{Policy: func() *allowlist.Policy { return policy }, OnEvent: u.proxyEvent}
	if u.res != nil {
		pc.Resolve = u.res.LookupNetIP
	}
	p, err := proxy.New(pc)
	if err != nil {
		u.Close()
		return nil, err
	}
	l, err := proxy.ListenLoopback(context.Background())
	if err != nil {
		u.Close()
		return nil, err
	}
	u.proxy = p
	go func() { _ = p.Serve(l) }()
	u.addr = netip.MustParseAddrPort(l.Addr().String())
	c, mode, err := confineCommand(cfg, u.addr.Port())
	if err != nil {
		u.Close()
		return nil, err
	}
	c.Stdin, c.Stdout, c.Stderr = cfg.Stdio[0], cfg.Stdio[1], cfg.Stdio[2]
	c.ExtraFiles = cfg.ExtraFiles
	u.cmd, u.mode = c, mode
	return u, nil
}

// Mode is the mode the session runs in: the one asked for, or ModeProxy
// where the platform has no such backend.
func (u *Userspace) Mode() string { return u.mode }

// ProxyAddr is the proxy's loopback address.
func (u *Userspace) ProxyAddr() netip.AddrPort { return u.addr }

// Run starts the command with env (its environment before the proxy
// variables, which Run adds unless NoProxyEnv), calls started once it
// runs, forwards this process's signals to it (not ^C and ^\ from a
// terminal, which already reached it) and returns its exit status
// (128+signal for a command a signal ended, as a shell does). An error
// before started was called is a command that could not be started;
// after, a wait that failed.
func (u *Userspace) Run(env []string, started func(UserspaceStarted)) (int, error) {
	c := u.cmd
	c.Env = env
	if !u.cfg.NoProxyEnv {
		c.Env = append(c.Env, proxy.Env(u.addr)...)
	}
	return supervise(c, isTerminal(u.cfg.Stdio[0]), func() {
		if started == nil {
			return
		}
		var entries []string
		for _, en := range u.cfg.Policy.Entries() {
			entries = append(entries, en.String())
		}
		started(UserspaceStarted{Name: u.name, PID: c.Process.Pid, UID: uint32(os.Getuid()), Path: c.Path, Policy: entries})
	})
}

// Close stops the proxy and the resolver.
func (u *Userspace) Close() {
	if u.proxy != nil {
		_ = u.proxy.Close()
	}
	if u.res != nil {
		u.res.Close()
	}
}

// proxyEvent hands a proxy event on as an audit event, or as a note when
// it reports no decision.
func (u *Userspace) proxyEvent(ev proxy.Event) {
	e, ok := audit.FromProxy("", ev)
	if !ok {
		if u.cfg.OnNote != nil {
			u.cfg.OnNote("proxy: " + ev.String())
		}
		return
	}
	if u.cfg.OnEvent != nil {
		u.cfg.OnEvent(e)
	}
}

// dnsEvent hands a resolver event on as an audit event: the proxy asked,
// no program, so no process is named.
func (u *Userspace) dnsEvent(ev dnsresolver.Event) {
	if u.cfg.OnEvent != nil {
		u.cfg.OnEvent(audit.FromDNS("", ev, ""))
	}
}
