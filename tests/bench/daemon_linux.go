// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/loader"
)

const (
	// sessionTimeout bounds one session of `true`; a healthy one takes
	// milliseconds, even among many concurrent ones.
	sessionTimeout = 20 * time.Second
	// idleTimeout bounds the idle sessions' phase, from the first create
	// to the last exit; their `sleep 60` outlives it.
	idleTimeout = 45 * time.Second
	// daemonStartTimeout bounds the daemon's start: loading and attaching
	// the datapath takes about a second.
	daemonStartTimeout = 15 * time.Second
)

// daemonAllowlist is the daemon's machine allowlist: documentation
// addresses only (RFC 5737, RFC 3849), never contacted, so that every
// session holds CIDR entries whose removal the leak check can see.
const daemonAllowlist = `{"allowed_hosts": ["198.51.100.0/24", "203.0.113.7", "2001:db8::/32"]}` + "\n"

// benchDaemonOnly is -only daemon: the daemon part alone, with its own
// table.
func benchDaemonOnly(ctx context.Context, o options) (missed bool, err error) {
	sluice, err := sluiceBinary(o.sluice)
	if err != nil {
		return false, err
	}
	loadBefore := loadAverage()
	res, err := measureDaemon(ctx, sluice, o.instance, o.daemonOpts)
	if err != nil {
		return false, err
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "%s; load average %s at start, %s at end\n\n", machineSummary(sluice), loadBefore, loadAverage())
	writeTable(w, res.rows())
	fmt.Fprintln(w)
	res.describe(w)
	return res.missed(), nil
}

// sluiceBinary is the absolute path of the -sluice binary, which must exist.
func sluiceBinary(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("-sluice: %w", err)
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("-sluice: %w (run `make build` first)", err)
	}
	return abs, nil
}

// daemonConfig is the instance of the daemon part: one of its own beside
// the driver's (instance-daemon), so that neither's programs, sessions or
// leftovers meet the other's. It is laid out as enforcer.ConfigFromEnv
// lays out SLUICE_INSTANCE, which is how the daemon process is told; the
// driver checks that the pins appear where it expects them.
func daemonConfig(instance string) enforcer.Config {
	name := instance + "-daemon"
	return enforcer.Config{CgroupName: name, PinDir: filepath.Join(filepath.Dir(loader.DefaultPinDir), name), StateDir: "/run/" + name}
}

// measureDaemon runs the daemon part within daemonBudget: a `sluice daemon`
// on an instance of its own, session rounds against bare exec, memory with
// idle sessions, then many sessions and the leak check. The instance is
// removed on the way out, whatever happened.
func measureDaemon(ctx context.Context, sluice, instance string, o daemonOptions) (*daemonResult, error) {
	start := time.Now()
	until := start.Add(daemonBudget)
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	phaseEnd := func(share float64) time.Time { return start.Add(time.Duration(share * float64(daemonBudget))) }

	sluice, err := sluiceBinary(sluice)
	if err != nil {
		return nil, err
	}
	cfg := daemonConfig(instance)
	// A run killed before its cleanup left the instance behind.
	if err := enforcer.Cleanup(cfg); err != nil {
		return nil, fmt.Errorf("remove leftovers of instance %s: %w", cfg.CgroupName, err)
	}
	defer func() {
		if cerr := enforcer.Cleanup(cfg); cerr != nil {
			fmt.Fprintf(os.Stderr, "bench: cleaning up instance %s: %v (run `SLUICE_INSTANCE=%s sluice cleanup --state-dir %s`)\n", cfg.CgroupName, cerr, cfg.CgroupName, cfg.StateDir)
		}
	}()
	dir, err := os.MkdirTemp("", "sluice-bench-daemon-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)

	fmt.Fprintf(os.Stderr, "bench: daemon: starting sluice daemon (instance %s)\n", cfg.CgroupName)
	d, err := startDaemon(ctx, sluice, cfg, dir)
	if err != nil {
		return nil, err
	}
	// Stopped before the instance is removed (deferred calls run last
	// first), so that nothing re-creates what Cleanup removes.
	defer d.stop()
	h, err := newDaemonHarness(d, cfg)
	if err != nil {
		return nil, err
	}
	defer h.close()

	res := &daemonResult{opts: o, clients: min(o.clients, o.sessions)}
	if err := h.measureSessions(ctx, res, phaseEnd(0.25)); err != nil {
		return nil, fmt.Errorf("daemon sessions: %w", err)
	}
	// The idle level, once the rounds' connections are gone: one
	// keep-alive API connection (the control client's) stays open from
	// here on, and counts in every reading.
	if err := h.waitNoSessions(ctx); err != nil {
		return nil, err
	}
	if res.rssIdle, err = d.rss(); err != nil {
		return nil, err
	}
	idleKinds, err := d.fds()
	if err != nil {
		return nil, err
	}
	res.fdIdle = total(idleKinds)

	if err := h.measureIdle(ctx, res, idleKinds); err != nil {
		return nil, fmt.Errorf("daemon idle sessions: %w", err)
	}
	if err := h.churn(ctx, res, phaseEnd(0.7)); err != nil {
		return nil, fmt.Errorf("daemon churn: %w", err)
	}
	fmt.Fprintln(os.Stderr, "bench: daemon: checking for leftovers")
	if err := h.checkLeaks(ctx, res, idleKinds); err != nil {
		return nil, fmt.Errorf("daemon leak check: %w", err)
	}
	if res.rssAfter, err = d.rss(); err != nil {
		return nil, err
	}

	if res.wallMissed() {
		h.explain(ctx, res, dir)
	}
	return res, nil
}

// daemonProc is a `sluice daemon` process started by the driver.
type daemonProc struct {
	cmd    *exec.Cmd
	socket string
	audit  string
	log    string
	allow  string
	exited chan struct{} // closed once it has been reaped
	err    error         // its exit, once exited is closed
}

// startDaemon starts `sluice daemon` on the instance cfg with its files in
// dir, and waits until it answers on its socket.
func startDaemon(ctx context.Context, sluice string, cfg enforcer.Config, dir string) (*daemonProc, error) {
	d := &daemonProc{
		socket: filepath.Join(dir, "sluice.sock"),
		audit:  filepath.Join(dir, "audit.jsonl"),
		log:    filepath.Join(dir, "daemon.log"),
		allow:  filepath.Join(dir, "network_allowlist.json"),
		exited: make(chan struct{}),
	}
	// An empty configuration file, so that the machine's
	// /etc/sluice/sluice.json (group, metrics address...) plays no part.
	conf := filepath.Join(dir, "sluice.json")
	if err := os.WriteFile(conf, []byte("{}\n"), 0o644); err != nil {
		return nil, fmt.Errorf("daemon configuration: %w", err)
	}
	if err := os.WriteFile(d.allow, []byte(daemonAllowlist), 0o644); err != nil {
		return nil, fmt.Errorf("daemon allowlist: %w", err)
	}
	logf, err := os.Create(d.log)
	if err != nil {
		return nil, fmt.Errorf("daemon log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(sluice, "daemon", "--config", conf, "--socket", d.socket, "--allowlist", d.allow,
		"--state-dir", cfg.StateDir, "--audit-log", d.audit, "--dns-upstream", "127.0.0.1:1")
	cmd.Dir = "/"
	cmd.Env = append(environWithout(enforcer.InstanceEnv, api.SocketEnv), enforcer.InstanceEnv+"="+cfg.CgroupName)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Should the driver be killed outright, the daemon goes too; the next
	// run removes what it left.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sluice daemon: %w", err)
	}
	d.cmd = cmd
	go func() {
		d.err = cmd.Wait()
		close(d.exited)
	}()

	c := api.NewClient(d.socket)
	deadline := time.Now().Add(daemonStartTimeout)
	for !c.Available(ctx) {
		select {
		case <-d.exited:
			return nil, fmt.Errorf("sluice daemon exited at start: %v%s", d.err, quoteOutput(d.output()))
		case <-ctx.Done():
			d.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("sluice daemon did not answer on %s within %s%s", d.socket, daemonStartTimeout, quoteOutput(d.output()))
		}
	}
	return d, nil
}

// environWithout is the driver's environment without the given variables.
func environWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return env
}

func (d *daemonProc) pid() int { return d.cmd.Process.Pid }

// output is the end of what the daemon printed, for error messages.
func (d *daemonProc) output() string {
	b, _ := os.ReadFile(d.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// stop asks the daemon to stop, as systemd would, and kills it if it does
// not within a few seconds. Its sessions, if any, stay; Cleanup removes
// them.
func (d *daemonProc) stop() {
	if d.cmd == nil {
		return
	}
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// rss is the daemon's resident set size.
func (d *daemonProc) rss() (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.pid()))
	if err != nil {
		return 0, fmt.Errorf("daemon memory: %w", err)
	}
	return procStatusKB(b, "VmRSS")
}

// cpu is the CPU time the daemon has used, its children excluded.
func (d *daemonProc) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.pid()))
	if err != nil {
		return 0, fmt.Errorf("daemon CPU time: %w", err)
	}
	return procStatCPU(b)
}

// fds counts the daemon's open descriptors by kind.
func (d *daemonProc) fds() (map[string]int, error) {
	dir := fmt.Sprintf("/proc/%d/fd", d.pid())
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("daemon descriptors: %w", err)
	}
	kinds := map[string]int{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		kinds[fdKind(target)]++
	}
	return kinds, nil
}

func total(kinds map[string]int) int {
	n := 0
	for _, v := range kinds {
		n += v
	}
	return n
}

// daemonHarness drives the daemon: its clients and what every session
// needs.
type daemonHarness struct {
	d         *daemonProc
	cfg       enforcer.Config
	ctl       *api.Client // sessions list and kills: one keep-alive connection
	null      *os.File    // the sessions' stdin, stdout and stderr
	truePath  string
	sleepPath string
}

func newDaemonHarness(d *daemonProc, cfg enforcer.Config) (*daemonHarness, error) {
	h := &daemonHarness{d: d, cfg: cfg, ctl: api.NewClient(d.socket)}
	var err error
	if h.truePath, err = exec.LookPath("true"); err != nil {
		return nil, fmt.Errorf("find true: %w", err)
	}
	if h.sleepPath, err = exec.LookPath("sleep"); err != nil {
		return nil, fmt.Errorf("find sleep: %w", err)
	}
	if h.null, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
		return nil, err
	}
	// The pins must be where the leak check will look.
	if _, err := os.Stat(filepath.Join(cfg.PinDir, "sessions")); err != nil {
		h.close()
		return nil, fmt.Errorf("the daemon's pinned maps are not where expected: %w", err)
	}
	return h, nil
}

func (h *daemonHarness) close() { h.null.Close() }

// run runs argv in a daemon session as uid 65534 and returns its wall
// time, the time to its session line and its exit status. started, if
// not nil, gets the session's name.
func (h *daemonHarness) run(ctx context.Context, timeout time.Duration, argv []string, started func(name string)) (wall, toSession time.Duration, code int, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := api.CreateRequest{Argv: argv, Path: argv[0], User: "65534:65534", Dir: "/", Env: []string{"PATH=/usr/bin:/bin"}}
	begin := time.Now()
	// Run dials a connection of its own for every session, as `sluice
	// run` does.
	code, err = h.ctl.Run(ctx, req, [3]*os.File{h.null, h.null, h.null}, func(si api.SessionInfo) {
		toSession = time.Since(begin)
		if started != nil {
			started(si.Name)
		}
	}, nil)
	wall = time.Since(begin)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return wall, toSession, code, fmt.Errorf("session of %s: %w%s", strings.Join(argv, " "), err, quoteOutput(h.d.tail()))
	}
	return wall, toSession, code, nil
}

// tail says, if the daemon has exited, how and what it printed last: that
// explains a failed request better than the request's own error.
func (d *daemonProc) tail() string {
	select {
	case <-d.exited:
		return fmt.Sprintf("the daemon exited (%v): %s", d.err, d.output())
	default:
	}
	return ""
}

// measureSessions runs the A/B rounds: `true` by bare exec as uid 65534
// against `true` in a daemon session, until the time until.
func (h *daemonHarness) measureSessions(ctx context.Context, res *daemonResult, until time.Time) error {
	trueArgv := []string{h.truePath}
	var err error
	if res.cold, _, _, err = h.run(ctx, sessionTimeout, trueArgv, nil); err != nil {
		return err
	}
	// Warm-up, unmeasured: the first sessions fault in code and grow
	// the daemon's pools.
	for range 3 {
		if _, _, _, err := h.run(ctx, sessionTimeout, trueArgv, nil); err != nil {
			return err
		}
	}
	bare := func() (time.Duration, error) {
		cmd := exec.CommandContext(ctx, h.truePath)
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody.UID, Gid: nobody.GID, Groups: []uint32{}}}
		return runCommand(cmd)
	}
	viaDaemon := func() (time.Duration, error) {
		wall, toSession, code, err := h.run(ctx, sessionTimeout, trueArgv, nil)
		if err != nil {
			return 0, err
		}
		if code != 0 {
			return 0, fmt.Errorf("true in a daemon session exited %d", code)
		}
		res.toSession = append(res.toSession, float64(toSession))
		res.toExit = append(res.toExit, float64(wall-toSession))
		return wall, nil
	}
	cpu0, err := h.d.cpu()
	if err != nil {
		return err
	}
	rounds, err := roundsWithin(res.opts.rounds, until, func(r int) error {
		if r%10 == 0 {
			fmt.Fprintf(os.Stderr, "bench: daemon: session create+spawn+exit, round %d/%d\n", r+1, res.opts.rounds)
		}
		a, b, err := pair(r, bare, viaDaemon)
		if err != nil {
			return err
		}
		res.wall.add(float64(a), float64(b))
		return nil
	})
	if err != nil {
		return err
	}
	cpu1, err := h.d.cpu()
	if err != nil {
		return err
	}
	res.cpuPerSession = (cpu1 - cpu0) / time.Duration(rounds)
	res.wallPerSession = time.Duration(median(res.wall.b))
	return nil
}

// waitNoSessions waits until the daemon lists no session: a session's
// exit line is sent once it is removed, but a killed one may lag.
func (h *daemonHarness) waitNoSessions(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ss, err := h.ctl.Sessions(ctx)
		if err != nil {
			return fmt.Errorf("list sessions: %w", err)
		}
		if len(ss) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the daemon still lists %d sessions 10 s after the last ended, e.g. %s", len(ss), ss[0].Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// measureIdle starts res.opts.idle sessions of `sleep 60`, reads the
// daemon's memory and descriptors (against idleKinds) once all have
// started, and kills them through the API.
func (h *daemonHarness) measureIdle(ctx context.Context, res *daemonResult, idleKinds map[string]int) error {
	n := res.opts.idle
	fmt.Fprintf(os.Stderr, "bench: daemon: starting %d idle sessions\n", n)
	ctx, cancel := context.WithTimeout(ctx, idleTimeout)
	defer cancel()
	names := make(chan string, n)
	type ended struct {
		code int
		err  error
	}
	ends := make(chan ended, n)
	// A few creates at a time, as agents would start: the figure is the
	// memory of sessions that exist, not of a queue of requests.
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				ends <- ended{err: ctx.Err()}
				return
			}
			var once sync.Once
			release := func() { once.Do(func() { <-sem }) }
			_, _, code, err := h.run(ctx, idleTimeout, []string{h.sleepPath, "60"}, func(name string) {
				names <- name
				release()
			})
			release()
			ends <- ended{code, err}
		})
	}
	// Whatever happens next, no goroutine outlives this phase: its
	// sessions are killed below, or by the deadline's cancellation.
	defer wg.Wait()
	defer cancel()

	var started []string
	for len(started) < n {
		select {
		case name := <-names:
			started = append(started, name)
		case e := <-ends:
			return fmt.Errorf("an idle session ended before all had started (exit %d): %v", e.code, e.err)
		case <-ctx.Done():
			return fmt.Errorf("%d of %d idle sessions started within %s: %w", len(started), n, idleTimeout, ctx.Err())
		}
	}
	res.busy = len(started)
	// Let what a session sets up after its session line (its event
	// reader, the stream's first flush) settle.
	time.Sleep(250 * time.Millisecond)
	var err error
	if res.rssBusy, err = h.d.rss(); err != nil {
		return err
	}
	kinds, err := h.d.fds()
	if err != nil {
		return err
	}
	res.fdBusy = total(kinds)
	res.fdBusyKinds = kindDiff(idleKinds, kinds)

	fmt.Fprintf(os.Stderr, "bench: daemon: killing %d idle sessions\n", n)
	// One at a time through the control client, so that its single
	// keep-alive connection is all that stays open.
	for _, name := range started {
		if err := h.ctl.Kill(ctx, name); err != nil {
			return fmt.Errorf("kill session %s: %w", name, err)
		}
	}
	for range n {
		select {
		case e := <-ends:
			const killed = 128 + int(syscall.SIGKILL)
			if e.err != nil || e.code != killed {
				return fmt.Errorf("a killed idle session ended with exit %d, want %d: %v", e.code, killed, e.err)
			}
		case <-ctx.Done():
			return fmt.Errorf("idle sessions did not all end once killed: %w", ctx.Err())
		}
	}
	return h.waitNoSessions(ctx)
}

// churn creates and removes res.opts.sessions sessions of `true` from
// res.clients concurrent clients, fewer if they would end after until.
func (h *daemonHarness) churn(ctx context.Context, res *daemonResult, until time.Time) error {
	n := res.opts.sessions
	fmt.Fprintf(os.Stderr, "bench: daemon: %d sessions from %d clients\n", n, res.clients)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, done atomic.Int64
		mu         sync.Mutex
		firstErr   error
		lat        = make([][]float64, res.clients)
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	begin := time.Now()
	var wg sync.WaitGroup
	for c := range res.clients {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(until) && next.Add(1) <= int64(n) {
				wall, _, code, err := h.run(ctx, sessionTimeout, []string{h.truePath}, nil)
				if err == nil && code != 0 {
					err = fmt.Errorf("true in a daemon session exited %d", code)
				}
				if err != nil {
					fail(err)
					return
				}
				lat[c] = append(lat[c], float64(wall))
				if d := done.Add(1); d%250 == 0 {
					fmt.Fprintf(os.Stderr, "bench: daemon: %d sessions done\n", d)
				}
			}
		})
	}
	wg.Wait()
	res.churnTime = time.Since(begin)
	res.churned = int(done.Load())
	for _, l := range lat {
		res.churnLat = append(res.churnLat, l...)
	}
	if firstErr != nil {
		return fmt.Errorf("after %d sessions: %w", res.churned, firstErr)
	}
	return nil
}
