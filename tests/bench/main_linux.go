// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/loader"
)

// options are the command-line flags.
type options struct {
	sluice      string
	instance    string
	rounds      int
	cidrs       int
	scale       float64
	seed        uint64
	budget      time.Duration
	timeout     time.Duration
	breakdown   bool
	strict      bool
	dns         bool
	only        string
	workers     *regexp.Regexp
	dnsOpts     dnsOptions
	daemon      bool
	daemonOpts  daemonOptions
	proxy       bool
	proxyOpts   proxyOptions
	kdns        bool // the kernel DNS path against the resolver path (kdns_linux.go)
	kdnsRounds  int
	kdnsDur     time.Duration
	workersDNS  string // the worker session's DNS path ("none": no DNS)
	jobs        bool   // the realistic jobs on every DNS path (jobs_linux.go)
	jobsRounds  int
	names       bool // name verification: TLS through the session's verifier (names_linux.go)
	namesRounds int
	portRules   bool // the worker session has port rules; the cycle's entry has none
}

func main() {
	var o options
	flag.StringVar(&o.sluice, "sluice", "bin/sluice", "the sluice `binary`, also measured as \"sluice run -- true\"")
	flag.StringVar(&o.instance, "instance", "sluice-bench", "isolated sluice instance (SLUICE_INSTANCE) to create and remove")
	flag.IntVar(&o.rounds, "rounds", 15, "A/B rounds per benchmark")
	flag.IntVar(&o.cidrs, "cidrs", 100_000, "CIDR entries loaded into the confined session")
	flag.Float64Var(&o.scale, "scale", 1, "multiplies every worker's iteration count")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the random CIDR set")
	flag.DurationVar(&o.budget, "budget", 130*time.Second, "measure for about this long at most: on a busy machine, run fewer rounds")
	flag.DurationVar(&o.timeout, "timeout", 720*time.Second, "give up (and clean up) after this long")
	flag.BoolVar(&o.breakdown, "breakdown", true, "when \"sluice run\" misses its target, trace one run with strace to show where the time goes")
	flag.BoolVar(&o.strict, "strict", false, "exit 1 when a target is missed")
	flag.StringVar(&o.only, "only", "", "run only this part: \"dns\" or \"proxy\" (need neither root nor the kernel), \"daemon\", \"run\" (the `sluice run -- true` rows), \"kdns\" (the kernel DNS path against the resolver path, in sessions), \"jobs\" (the realistic jobs) or \"names\" (name verification)")
	flag.BoolVar(&o.kdns, "kdns", true, "measure the kernel DNS path against the resolver path, in real sessions (about 100 s)")
	flag.IntVar(&o.kdnsRounds, "kdns-rounds", 5, "rounds of the kernel DNS path benchmark (three arms each)")
	flag.DurationVar(&o.kdnsDur, "kdns-dur", 1500*time.Millisecond, "measured time of each case of the kernel DNS path benchmark (shorter cases, more rounds: finer alternation on a busy machine)")
	flag.StringVar(&o.workersDNS, "workers-dns", "auto", "DNS path of the worker benchmarks' confined session, as `sluice run` gives one: auto (the default path), kernel, resolver, or none (no DNS redirection: the datapath alone)")
	flag.BoolVar(&o.jobs, "jobs", true, "measure the realistic jobs (curl processes, a Go client) unconfined and on every DNS path (about 80 s)")
	flag.IntVar(&o.jobsRounds, "jobs-rounds", 5, "rounds of the realistic jobs (four arms each)")
	flag.BoolVar(&o.portRules, "port-rules", false, "give the worker session port rules (loader.FlagPortRules) while the cycle's entry has none, so that the cycle pays a session-with-ports' lookups")
	flag.BoolVar(&o.names, "names", true, "measure name verification: new TLS connections, a TLS and an HTTP stream through checked connections (judged in the kernel), the TCP connect to an IP entry beside them (about 40 s)")
	flag.IntVar(&o.namesRounds, "names-rounds", 5, "rounds of the name verification part (three arms each)")
	flag.Func("workers", "run only the worker benchmarks whose name matches this `regexp` (e.g. cycle)", func(v string) (err error) {
		o.workers, err = regexp.Compile(v)
		return err
	})
	addDNSFlags(flag.CommandLine, &o.dns, &o.dnsOpts)
	addProxyFlags(flag.CommandLine, &o.proxy, &o.proxyOpts)
	addDaemonFlags(flag.CommandLine, &o.daemon, &o.daemonOpts)
	flag.Parse()
	os.Exit(run(o))
}

func run(o options) int {
	dnsOnly, daemonOnly, proxyOnly, runOnly := o.only == "dns", o.only == "daemon", o.only == "proxy", o.only == "run"
	kdnsOnly, jobsOnly, namesOnly := o.only == "kdns", o.only == "jobs", o.only == "names"
	if o.only != "" && !dnsOnly && !daemonOnly && !proxyOnly && !runOnly && !kdnsOnly && !jobsOnly && !namesOnly {
		fmt.Fprintf(os.Stderr, "bench: -only %q: the parts that run alone are \"dns\", \"proxy\", \"daemon\", \"run\", \"kdns\", \"jobs\" and \"names\"\n", o.only)
		return 2
	}
	if err := o.proxyOpts.validate(); (o.proxy || proxyOnly) && err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 2
	}
	if err := o.daemonOpts.validate(); (o.daemon || daemonOnly) && err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 2
	}
	if err := o.dnsOpts.validate(); (o.dns || dnsOnly) && err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 2
	}
	// The DNS and daemon parts have budgets of their own, on top of -budget.
	minTimeout := o.budget
	switch {
	case dnsOnly:
		minTimeout = dnsBudget
	case daemonOnly:
		minTimeout = daemonBudget
	case proxyOnly:
		minTimeout = proxyBudget
	case kdnsOnly:
		minTimeout = kdnsBudget
	case jobsOnly:
		minTimeout = jobsBudget
	case namesOnly:
		minTimeout = namesBudget
	case o.dns:
		minTimeout += dnsBudget
	}
	if o.proxy && o.only == "" {
		minTimeout += proxyBudget
	}
	if o.daemon && o.only == "" {
		minTimeout += daemonBudget
	}
	if o.kdns && o.only == "" {
		minTimeout += kdnsBudget
	}
	if o.jobs && o.only == "" {
		minTimeout += jobsBudget
	}
	if o.names && o.only == "" {
		minTimeout += namesBudget
	}
	if !dnsOnly && !proxyOnly && os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench: needs root (it loads BPF programs and creates cgroups and network namespaces): sudo make bench")
		return 1
	}
	if o.kdnsDur <= 0 || o.kdnsRounds < 1 || o.jobsRounds < 1 || o.jobsRounds > 50 {
		fmt.Fprintln(os.Stderr, "bench: want -kdns-dur > 0, -kdns-rounds ≥ 1 and 1 ≤ -jobs-rounds ≤ 50")
		return 2
	}
	if o.rounds < 1 || o.rounds > 200 || o.cidrs < 2 || o.scale <= 0 || o.scale > 100 || o.budget <= 0 || o.timeout < minTimeout {
		fmt.Fprintf(os.Stderr, "bench: want 1 ≤ -rounds ≤ 200, -cidrs ≥ 2, 0 < -scale ≤ 100, 0 < -budget and -timeout ≥ %s (-budget, plus %s with the DNS part, %s with the proxy part and %s with the daemon part)\n", minTimeout, dnsBudget, proxyBudget, daemonBudget)
		return 2
	}
	// Cleanup runs in deferred calls, so a signal must end the measurement,
	// not the process: NotifyContext turns it into a cancellation, and
	// stays registered until run returns so that a second ^C cannot cut
	// the cleanup short either.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	measure := bench
	switch {
	case dnsOnly:
		measure = benchDNSOnly
	case daemonOnly:
		measure = benchDaemonOnly
	case proxyOnly:
		measure = benchProxyOnly
	case runOnly:
		measure = benchRunOnly
	case kdnsOnly:
		measure = benchKDNSOnly
	case jobsOnly:
		measure = benchJobsOnly
	case namesOnly:
		measure = benchNamesOnly
	}
	missed, err := measure(ctx, o)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("gave up after -timeout %s: %w", o.timeout, err)
		} else if ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", err)
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	if missed && o.strict {
		return 1
	}
	return 0
}

// bench runs everything and prints the results. It reports whether a
// target was missed.
func bench(ctx context.Context, o options) (missed bool, err error) {
	// The DNS part comes first and has its own budget: it needs none of
	// what follows, and the phases below are timed from their own start.
	var dnsRes *dnsResult
	if o.dns {
		if dnsRes, err = measureDNS(ctx, o.dnsOpts); err != nil {
			return false, err
		}
	}
	// So does the proxy part.
	var proxyRes *proxyResult
	if o.proxy {
		if proxyRes, err = measureProxy(ctx, o.proxyOpts); err != nil {
			return false, err
		}
	}
	// So does the daemon part, on an instance of its own.
	var daemonRes *daemonResult
	if o.daemon {
		if daemonRes, err = measureDaemon(ctx, o.sluice, o.instance, o.daemonOpts); err != nil {
			return false, err
		}
	}
	// So does the kernel DNS path, on an instance of its own.
	var kdnsRes *kdnsResult
	if o.kdns {
		if kdnsRes, err = measureKDNS(ctx, o.instance, o.kdnsRounds, o.kdnsDur); err != nil {
			return false, err
		}
	}
	// So do the realistic jobs, on an instance of their own.
	var jobsRes *jobsResult
	if o.jobs {
		if jobsRes, err = measureJobs(ctx, o.instance, o.jobsRounds); err != nil {
			return false, err
		}
	}
	// So does name verification.
	var namesRes *namesResult
	if o.names {
		if namesRes, err = measureNames(ctx, o.instance, o.namesRounds); err != nil {
			return false, err
		}
	}
	// The time budget, split between the phases: `sluice run` rounds first,
	// then the worker rounds, then the `sluice run` rounds beside a loaded
	// session.
	start := time.Now()
	phaseEnd := func(share float64) time.Time { return start.Add(time.Duration(share * float64(o.budget))) }
	sluice, err := filepath.Abs(o.sluice)
	if err != nil {
		return false, fmt.Errorf("-sluice: %w", err)
	}
	if _, err := os.Stat(sluice); err != nil {
		return false, fmt.Errorf("-sluice: %w (run `make build` first)", err)
	}
	// Both the in-process enforcer and every `sluice run` use the isolated
	// instance, so a real installation is never touched.
	if err := os.Setenv(enforcer.InstanceEnv, o.instance); err != nil {
		return false, err
	}
	cfg, err := enforcer.ConfigFromEnv()
	if err != nil {
		return false, fmt.Errorf("-instance: %w", err)
	}
	// A run killed before its cleanup left the instance behind; start from
	// nothing, which also makes the first `sluice run` a cold one.
	if err := enforcer.Cleanup(cfg); err != nil {
		return false, fmt.Errorf("remove leftovers of instance %s: %w", o.instance, err)
	}
	defer func() {
		if cerr := enforcer.Cleanup(cfg); cerr != nil {
			fmt.Fprintf(os.Stderr, "bench: cleaning up instance %s: %v (run `SLUICE_INSTANCE=%s sluice cleanup`)\n", o.instance, cerr, o.instance)
		}
	}()

	tmp, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		return false, fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	// uid 65534 must be able to execute the worker inside it.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return false, fmt.Errorf("temporary directory: %w", err)
	}
	loadBefore := loadAverage()
	fmt.Fprintln(os.Stderr, "bench: building the worker")
	worker, err := buildWorker(ctx, tmp)
	if err != nil {
		return false, err
	}

	rt, err := benchRunTrue(ctx, sluice, o.rounds, phaseEnd(0.2), true, "")
	if err != nil {
		return false, fmt.Errorf("sluice run -- true: %w", err)
	}
	// Traced now, while no other session exists, so that the breakdown
	// explains the row it belongs to.
	var breakdown bytes.Buffer
	runMissed := median(rt.wall.added()) >= float64(maxRunAdded)
	if runMissed && o.breakdown {
		fmt.Fprintln(os.Stderr, "bench: tracing one sluice run -- true")
		if err := runBreakdown(ctx, &breakdown, sluice, tmp, "with no other session"); err != nil {
			fmt.Fprintf(os.Stderr, "bench: breakdown: %v\n", err)
		}
	}

	free, err := openFreeCgroup(o.instance + "-free")
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := free.Close(); cerr != nil {
			fmt.Fprintf(os.Stderr, "bench: removing the unconfined cgroup: %v\n", cerr)
		}
	}()
	e, err := enforcer.Open(cfg)
	if err != nil {
		return false, fmt.Errorf("open the enforcer: %w", err)
	}
	defer e.Close()
	// The worker session has DNS as `sluice run` sets it up (its per-packet
	// programs are part of what a session's connections pay); nothing
	// here asks a name, so the upstream never hears from it.
	var sessOpts enforcer.Options
	if o.workersDNS != "none" {
		path, err := enforcer.ParseDNSPath(o.workersDNS)
		if err != nil {
			return false, fmt.Errorf("-workers-dns: %w", err)
		}
		sessOpts.DNS = &enforcer.DNSOptions{Path: path, Upstreams: []string{"127.0.0.1:53"}}
	}
	sess, err := e.NewSession(sessOpts)
	if err != nil {
		return false, fmt.Errorf("new session: %w", err)
	}
	defer func() {
		if cerr := sess.Close(); cerr != nil {
			fmt.Fprintf(os.Stderr, "bench: closing the session: %v\n", cerr)
		}
	}()

	rng := rand.New(rand.NewPCG(o.seed, 0x5eed))
	prefixes := randomPrefixes(rng, o.cidrs)
	fmt.Fprintf(os.Stderr, "bench: loading %d CIDRs into session %s\n", len(prefixes), sess.Name())
	loadStart := time.Now()
	if err := e.Datapath().AddCIDRs(sess.ID(), prefixes); err != nil {
		return false, fmt.Errorf("load the CIDR set: %w", err)
	}
	loadTime := time.Since(loadStart)
	if n, _, err := e.Datapath().Entries(sess.ID()); err != nil || n != len(prefixes) {
		return false, fmt.Errorf("the datapath holds %d CIDRs for the session, want %d (%v)", n, len(prefixes), err)
	}

	// The cycle benchmark's listener address: one more entry in the
	// session's map.
	if err := e.Datapath().AddCIDRs(sess.ID(), []netip.Prefix{netip.PrefixFrom(cycleAddr, 32)}); err != nil {
		return false, fmt.Errorf("allow the cycle benchmark's address: %w", err)
	}
	if o.portRules {
		if err := portRuleSession(e.Datapath(), sess); err != nil {
			return false, err
		}
	}

	benches, rounds, err := measureWorkers(ctx, o, phaseEnd(0.85), worker, sess, free, rng, prefixes)
	if err != nil {
		return false, err
	}

	// Sessions share the datapath's maps, so one session's policy can make
	// another's start or teardown slower: measure that too. It comes last
	// because every `sluice run` loads the programs afresh and swaps them
	// into the pinned links, after which this process's Session.Start no
	// longer finds its own programs in force and refuses to spawn.
	loaded, err := benchRunTrue(ctx, sluice, max(3, o.rounds/3), phaseEnd(1), false, " beside the loaded session")
	if err != nil {
		return false, fmt.Errorf("sluice run -- true beside the loaded session: %w", err)
	}

	// Traced only with time to spare: strace stops the process at every
	// system call, and a slow run here is usually one making many.
	loadedMissed := median(loaded.wall.added()) >= float64(maxRunAdded)
	if dl, ok := ctx.Deadline(); loadedMissed && o.breakdown && ok && time.Until(dl) > 45*time.Second {
		fmt.Fprintln(os.Stderr, "bench: tracing one sluice run -- true beside the loaded session")
		if breakdown.Len() > 0 {
			breakdown.WriteString("\n")
		}
		if err := runBreakdown(ctx, &breakdown, sluice, tmp, fmt.Sprintf("while another session holds %d CIDRs", len(prefixes))); err != nil {
			fmt.Fprintf(os.Stderr, "bench: breakdown: %v\n", err)
		}
	}

	rows := make([]tableRow, 0, len(benches)+2)
	for _, b := range benches {
		rows = append(rows, ratioRow(b.name, &b.s, b.maxRatio))
		missed = missed || (b.maxRatio > 0 && median(b.s.ratios()) > b.maxRatio)
	}
	rows = append(rows, addedRow("`sluice run -- true` vs `true`, wall", &rt.wall, maxRunAdded))
	rows = append(rows, addedRow(fmt.Sprintf("the same, while another session holds the %d CIDRs", len(prefixes)), &loaded.wall, maxRunAdded))
	missed = missed || runMissed || loadedMissed
	if dnsRes != nil {
		rows = append(rows, dnsRes.rows()...)
		missed = missed || dnsRes.missed()
	}
	if kdnsRes != nil {
		rows = append(rows, kdnsRes.rows()...)
		missed = missed || kdnsRes.missed()
	}
	if proxyRes != nil {
		rows = append(rows, proxyRes.rows()...)
		missed = missed || proxyRes.missed()
	}
	if daemonRes != nil {
		rows = append(rows, daemonRes.rows()...)
		missed = missed || daemonRes.missed()
	}

	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "%s; load average %s at start, %s at end\n", machineSummary(sluice), loadBefore, loadAverage())
	fmt.Fprintln(w)
	// The realistic jobs first: they are what a user feels.
	if jobsRes != nil {
		jobsRes.write(w)
		fmt.Fprintln(w)
		jobsRes.describe(w)
		fmt.Fprintln(w)
		missed = missed || jobsRes.missed()
	}
	if namesRes != nil {
		namesRes.write(w)
		fmt.Fprintln(w)
		namesRes.describe(w)
		fmt.Fprintln(w)
		missed = missed || namesRes.missed()
	}
	roundsNote := fmt.Sprintf("%d rounds", rounds)
	if rounds < o.rounds || len(rt.wall.a) < o.rounds {
		roundsNote = fmt.Sprintf("%d rounds of worker benchmarks and %d of `sluice run` (of %d asked: the machine was too slow for -budget %s)", rounds, len(rt.wall.a), o.rounds, o.budget)
	}
	fmt.Fprintf(w, "%s, arms alternating (A B, then B A); per-operation times are medians, as uid 65534. The confined session (DNS path %s) holds %d CIDRs (%d IPv4 in 10.0.0.0/8, %d IPv6 in fd00::/8; loaded in %s); no traffic goes to them. The judged connects run in an empty network namespace, so nothing is sent; the cycle's listener is on %s, put on lo of the worker's own empty namespace and allowed by one more CIDR.\n\n",
		roundsNote, o.workersDNS, len(prefixes), o.cidrs/2, len(prefixes)-o.cidrs/2, loadTime.Round(time.Millisecond), cycleAddr)
	writeTable(w, rows)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "`sluice run -- true`: first run on a fresh instance (creates the cgroup, maps and pins) %s; CPU time of a run, median: user %s, system %s.\n",
		fmtNS(float64(rt.cold)), fmtNS(median(rt.user)), fmtNS(median(rt.sys)))
	if dnsRes != nil {
		fmt.Fprintln(w)
		dnsRes.describe(w)
	}
	if kdnsRes != nil {
		fmt.Fprintln(w)
		kdnsRes.describe(w)
	}
	if proxyRes != nil {
		fmt.Fprintln(w)
		proxyRes.describe(w)
	}
	if daemonRes != nil {
		fmt.Fprintln(w)
		daemonRes.describe(w)
	}
	if breakdown.Len() > 0 {
		fmt.Fprintln(w)
		w.Write(breakdown.Bytes())
	}
	return missed, nil
}

func joinAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// loadAverage is the one-minute load average: other work on the machine is
// the main source of noise in these figures, and the reader should know.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// machineSummary is one line saying what the figures were measured on.
func machineSummary(sluice string) string {
	var u unix.Utsname
	kernel := "unknown kernel"
	if unix.Uname(&u) == nil {
		kernel = "kernel " + unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
	}
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	version := "unknown"
	if out, err := exec.Command(sluice, "version").Output(); err == nil {
		version = strings.TrimSpace(strings.TrimPrefix(string(out), "sluice "))
	}
	return fmt.Sprintf("machine: %s, %d CPUs (%s), %s, sluice %s", kernel, runtime.NumCPU(), model, runtime.Version(), version)
}

// benchRunOnly measures just the `sluice run -- true` rows (embedded, on a
// fresh instance): what a session, sandbox included, adds to a command.
func benchRunOnly(ctx context.Context, o options) (missed bool, err error) {
	sluice, err := sluiceBinary(o.sluice)
	if err != nil {
		return false, err
	}
	if err := os.Setenv(enforcer.InstanceEnv, o.instance); err != nil {
		return false, err
	}
	cfg, err := enforcer.ConfigFromEnv()
	if err != nil {
		return false, fmt.Errorf("-instance: %w", err)
	}
	if err := enforcer.Cleanup(cfg); err != nil {
		return false, fmt.Errorf("remove leftovers of instance %s: %w", o.instance, err)
	}
	defer func() {
		if cerr := enforcer.Cleanup(cfg); cerr != nil {
			fmt.Fprintf(os.Stderr, "bench: cleaning up instance %s: %v\n", o.instance, cerr)
		}
	}()
	loadBefore := loadAverage()
	rt, err := benchRunTrue(ctx, sluice, o.rounds, time.Now().Add(o.budget), true, "")
	if err != nil {
		return false, fmt.Errorf("sluice run -- true: %w", err)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "%s; load average %s at start, %s at end\n\n", machineSummary(sluice), loadBefore, loadAverage())
	writeTable(w, []tableRow{addedRow("`sluice run -- true` vs `true`, wall", &rt.wall, maxRunAdded)})
	fmt.Fprintf(w, "\n`sluice run -- true`: first run on a fresh instance %s; CPU time of a run, median: user %s, system %s.\n",
		fmtNS(float64(rt.cold)), fmtNS(median(rt.user)), fmtNS(median(rt.sys)))
	return median(rt.wall.added()) >= float64(maxRunAdded), nil
}

// portRuleSession gives the worker session port rules (-port-rules): the
// session flag, and the cycle's address with rule 0 (every port) in
// cidr_ports, so that an allowed connect pays the port-rule lookups of a
// session in which some other entry has ports.
func portRuleSession(dp *loader.Datapath, sess *enforcer.Session) error {
	if err := dp.SetCIDRPorts(sess.ID(), netip.PrefixFrom(cycleAddr, 32), 0); err != nil {
		return fmt.Errorf("-port-rules: %w", err)
	}
	flags, err := dp.SessionFlagsOf(sess.ID())
	if err != nil {
		return fmt.Errorf("-port-rules: %w", err)
	}
	v4, v6 := sess.DNSPorts()
	if err := dp.SetSession(sess.ID(), loader.SessionConfig{Flags: flags | loader.FlagPortRules, DNSPort4: v4, DNSPort6: v6}); err != nil {
		return fmt.Errorf("-port-rules: %w", err)
	}
	return nil
}
