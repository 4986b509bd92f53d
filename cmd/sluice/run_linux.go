// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/sandbox"
	"github.com/sluice-dev/sluice/userspace/landlock"
)

// runConfined is the embedded enforcer: it sets up a session, runs the
// command in it and tears the session down when the command exits.
// runConfined picks the confinement mode (the strongest available unless
// --mode forces one: a forced mode that is unavailable is an error, never a
// silent downgrade) and runs the command under it.
func runConfined(cmd *cobra.Command, o runOptions, policy *allowlist.Policy, memMax int64, argv []string) error {
	fail := func(err error) error { return &exitError{code: exitSluiceError, err: err} }

	// An explicit socket means "through the daemon": falling back to the
	// embedded enforcer would silently apply another policy.
	explicit := socketFlag != "" || os.Getenv(api.SocketEnv) != ""
	var why []string
	if o.mode == "" || o.mode == modeBPF {
		c := client()
		err := c.Reach(cmd.Context())
		switch {
		case err == nil:
			return runViaDaemon(cmd, c, o, policy, memMax, argv)
		case explicit && errors.Is(err, os.ErrPermission):
			return fail(fmt.Errorf("the sluice daemon's socket %v", err))
		case explicit:
			return fail(fmt.Errorf("no sluice daemon answers on %s", api.SocketPath(socketFlag)))
		case errors.Is(err, os.ErrPermission):
			// A daemon is there, but not for this user: say so rather
			// than fall back in silence.
			why = append(why, "the daemon's socket "+err.Error())
		}
	}
	if o.mode == "" || o.mode == modeBPF {
		if os.Geteuid() == 0 {
			return runBPF(cmd, o, policy, memMax, argv)
		}
		if o.mode == modeBPF {
			return fail(errors.New("--mode bpf needs root or a running daemon: run `sudo sluice run ...`, or start `sluice daemon`"))
		}
		why = append(why, "bpf needs root or a running daemon")
	}
	if o.mode == "" || o.mode == modeLandlock {
		err := landlock.Available()
		if err == nil {
			return runUserspace(cmd, o, policy, argv, modeLandlock, why)
		}
		if o.mode == modeLandlock {
			return fail(fmt.Errorf("--mode landlock: %w", err))
		}
		why = append(why, "landlock: "+err.Error())
	}
	return runUserspace(cmd, o, policy, argv, modeProxy, why)
}

// runBPF is the embedded enforcer: kernel enforcement from this process.
func runBPF(cmd *cobra.Command, o runOptions, policy *allowlist.Policy, memMax int64, argv []string) error {
	stderr := cmd.ErrOrStderr()
	fail := func(err error) error { return &exitError{code: exitSluiceError, err: err} }
	spawn, err := targetUser(o.user)
	if err != nil {
		return fail(err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return &exitError{code: exitNotFound, err: fmt.Errorf("%s: command not found", argv[0])}
	}

	cfg, err := enforcer.ConfigFromEnv()
	if err != nil {
		return fail(err)
	}
	e, err := enforcer.Open(cfg)
	if err != nil {
		return fail(err)
	}
	defer e.Close()
	alog, err := openRunAudit(o.auditLog)
	if err != nil {
		return fail(err)
	}
	defer alog.close()
	fmt.Fprintln(stderr, "sluice: mode bpf: the kernel enforces the allowlist for the command and all it starts")
	rep := newReporter(stderr)
	var sess atomic.Pointer[enforcer.Session] // set before the command can ask anything
	owner := func(ev dnsresolver.Event) string {
		if s := sess.Load(); s != nil {
			return s.SocketOwner(ev.Client)
		}
		return ""
	}
	dnsPath, err := enforcer.ParseDNSPath(pick(o.dnsPath, "", dnsPathDefault))
	if err != nil {
		return fail(fmt.Errorf("--dns-path: %w", err))
	}
	dns := &enforcer.DNSOptions{
		Path:      dnsPath,
		Upstreams: o.dnsUpstreams, MinTTL: o.dnsTTLMin, MaxTTL: o.dnsTTLMax, Grace: o.dnsGrace, MaxIPsPerName: o.dnsMaxIPs,
		OnEvent: onDNSEvent(rep, alog, owner),
	}
	var prox *enforcer.ProxyOptions
	if !o.noProxyEnv {
		prox = &enforcer.ProxyOptions{OnEvent: onProxyEvent(rep, alog)}
	}
	s, err := e.NewSession(enforcer.Options{Policy: policy, Audit: o.audit, PidsMax: o.pidsMax, MemoryMax: memMax, DNS: dns, Proxy: prox,
		UnixSockets: []string{api.SocketPath(socketFlag)}})
	if err != nil {
		return fail(err)
	}
	if err := s.KernelDNSError(); err != nil {
		if dnsPath == enforcer.DNSPathAuto {
			fmt.Fprintf(stderr, "sluice: DNS takes the resolver path, with no kernel failover: %v\n", err)
		} else {
			fmt.Fprintf(stderr, "sluice: DNS takes the resolver path: %v\n", err)
		}
	}
	// Events can come only once the command runs, after this.
	alog.session = s.Name()
	sess.Store(s)
	defer func() {
		if err := s.Close(); err != nil {
			fmt.Fprintf(stderr, "sluice: cleaning up session %s: %v\n", s.Name(), err)
		}
	}()

	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			ev, err := s.ReadEvent()
			if errors.Is(err, enforcer.ErrBadEvent) {
				continue
			}
			if err != nil {
				return // flushed and drained, or closed
			}
			rep.Report(audit.FromKernelBrief(s.Name(), ev), nil)
			if alog.on() {
				var learnedFrom func(netip.Addr) []string
				if r := s.Resolver(); r != nil {
					learnedFrom = r.LearnedFrom
				}
				alog.write(audit.FromKernel(s.Name(), ev, learnedFrom))
			}
		}
	})

	// The sandbox's refusals (ptrace, pidfd_getfd, signals to processes
	// outside the session) are explained like the datapath's.
	var sw *sandboxWatch
	if !o.shareProcesses {
		sw = watchSandbox(e, s.Name(), func(ev audit.Event) {
			rep.Report(ev, nil)
			alog.write(ev)
		})
	}

	hidden, err := sandbox.HiddenPaths(nil, policy.HiddenPaths(), o.showPaths)
	if err != nil {
		return fail(err)
	}
	readOnly, err := sandbox.ReadOnlyPaths(nil, o.readOnly)
	if err != nil {
		return fail(fmt.Errorf("--read-only: %w", err))
	}
	spec := enforcer.CommandSpec{Path: path, Argv: argv, Env: o.commandEnv(stderr),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, ExtraFiles: o.passFiles, User: spawn,
		Sandbox: enforcer.SandboxSpec{ShareProcesses: o.shareProcesses, Hidden: &hidden, AllowUserNamespaces: o.allowUserNamespaces, ReadOnly: readOnly}}
	var hid []string // filled on the spawning thread, before Start returns
	spec.Sandbox.OnHidden = func(p string) { hid = append(hid, p) }
	spec.Sandbox.OnSocketDropped = func(name, why string) {
		fmt.Fprintf(stderr, "sluice: note: the unix socket %s is not reachable in this session: %s\n", name, why)
	}
	started := false
	waitErr := supervise(func() (*exec.Cmd, error) {
		c, err := s.Start(spec)
		if err != nil {
			code := exitSluiceError
			if errors.Is(err, os.ErrPermission) || errors.Is(err, unix.ENOEXEC) {
				code = exitCannotExec
			}
			return nil, &exitError{code: code, err: fmt.Errorf("start %s: %w", argv[0], err)}
		}
		started = true
		sw.started(c.Process.Pid, s.Name())
		if len(hid) > 0 {
			fmt.Fprintln(stderr, hiddenNotice(hid))
		}
		var entries []string
		for _, en := range s.Policy().Entries() {
			entries = append(entries, en.String())
		}
		alog.started(c.Process.Pid, spawn.UID, path, entries, argv[0]+sandbox.StartedNote(hid))
		return c, nil
	})
	if !started {
		sw.finish()
		return waitErr
	}

	// The command is gone; whatever it left behind goes with the session.
	_ = s.Kill()
	_ = s.FlushEvents()
	readers.Wait()
	sw.finish()
	alog.ended(waitErr)
	if sum := rep.Summary(); sum != "" {
		fmt.Fprintln(stderr, sum)
	}
	return writeSuggestion(o, rep, policy, stderr, waitErr)
}

// targetUser is whom the command runs as: --user, else the user who
// invoked sudo. sluice never runs the command as root.
func targetUser(spec string) (cgroups.SpawnOptions, error) {
	if spec == "" {
		uid, gid := os.Getenv("SUDO_UID"), os.Getenv("SUDO_GID")
		if uid == "" || uid == "0" {
			return cgroups.SpawnOptions{}, errors.New("the command would run as root, which could move itself out of the session's cgroup: run sluice through sudo as your user, or pass --user USER[:GROUP]")
		}
		spec = uid
		if gid != "" {
			spec += ":" + gid
		}
	}
	opts, err := cgroups.LookupUser(spec)
	if err != nil {
		return cgroups.SpawnOptions{}, fmt.Errorf("--user %s: %w", spec, err)
	}
	if opts.UID == 0 {
		return cgroups.SpawnOptions{}, errors.New("--user: sluice never runs the command as root: a root process could move itself out of the session's cgroup")
	}
	return opts, nil
}

// hiddenNotice is the line that names what the sandbox hid, so that an
// empty credential file is not a mystery.
func hiddenNotice(hid []string) string {
	shown := hid
	if len(shown) > 4 {
		shown = shown[:4]
	}
	more := ""
	if len(hid) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(hid)-len(shown))
	}
	return fmt.Sprintf("sluice: sandbox: hidden (empty, read-only): %s%s (--show-path PATH to see one)", strings.Join(shown, ", "), more)
}
