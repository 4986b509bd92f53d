// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/enforcer"
)

// The realistic jobs (issue 19): what a user feels of the DNS paths. Two
// jobs run as uid 65534 in a network namespace of their own (the job
// world: loopback only, holding a stub upstream on jobDNSAddr and an HTTP
// server on jobHTTPAddr) with a mount namespace whose /etc/resolv.conf
// names the stub, as a host's names its recursive resolver:
//
//	A  a loop of curl processes: each a glibc lookup (A and AAAA) and a
//	   new connection, as a shell script's curl calls are
//	B  one Go HTTP client, a new connection and lookup per request
//
// The stub waits before it answers (jobDelays: a nearby recursive resolver,
// then one on the same host) and sends an SOA with its negative answers
// (every AAAA here), as real servers do. Each job runs in four arms in an
// order that alternates between rounds: unconfined (a cgroup with no sluice
// program), and sessions on the default path (auto), the kernel path and
// the resolver path. Each run asks names of its own, so no cache carries
// over from a run before.

// Targets of the default path against unconfined (issue 19).
var jobTargets = map[time.Duration]float64{5 * time.Millisecond: 1.0, 0: 1.05}

// jobDelays are the stub upstream's delays before it answers.
var jobDelays = []time.Duration{5 * time.Millisecond, 0}

var (
	jobDNSAddr  = netip.MustParseAddr("203.0.113.53")
	jobHTTPAddr = netip.MustParseAddr("203.0.113.80")
)

// jobsBudget bounds the part with the default -jobs-rounds.
const jobsBudget = 120 * time.Second

// jobSpec is one realistic job.
type jobSpec struct {
	op, what        string
	requests, names int
}

var jobSpecs = []jobSpec{
	{"curl", "100 `curl` processes over 10 host names (glibc, A+AAAA each)", 100, 10},
	{"goclient", "a Go client, 300 requests over 20 names, a new connection and lookup each", 300, 20},
}

// jobArms are the arms, unconfined first, then the default. The jobs talk
// HTTP on port 80, whose connections to learned addresses the default
// policy has checked for their name (the verifier, issue 18): the arm
// "resolver, names unchecked" has "verify": "address" on its entry (which
// keeps a session's DNS on the resolver path), so that beside the resolver
// arm the DNS path's cost and the name check's show apart in one run.
var jobArms = []string{"unconfined", "default (auto)", "resolver, names unchecked", "kernel", "resolver"}

// jobArmUnchecked is the index of the arm without name checks.
const jobArmUnchecked = 2

// jobsResult holds, per delay and job, the wall times of each arm per
// round (ns), arm 0 the unconfined one.
type jobsResult struct {
	rounds int
	times  map[time.Duration][][][]float64 // [delay][job][arm][round]
	// stubQueries and httpRequests are what the job world recorded.
	stubQueries, httpRequests uint64
}

// jobWorld is the job world: its network namespace and its servers.
type jobWorld struct {
	ns       *os.File
	resolv   string // the resolv.conf bind-mounted over the jobs' own
	upstream netip.AddrPort
	delay    atomic.Int64 // ns
	queries  atomic.Uint64
	requests atomic.Uint64
	dnsSrv   []*dns.Server
	httpSrv  *http.Server
}

// startJobWorld creates the job world. The stub answers on jobDNSAddr:53
// in the world (where resolv.conf sends the jobs), and on 127.0.0.1:P both
// in the world and here (the sessions' upstream: a session's resolver asks
// it from the enforcer's namespace, the kernel path from the job's).
func startJobWorld(dir string) (*jobWorld, error) {
	w := &jobWorld{}
	host, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		return nil, fmt.Errorf("job world: stub upstream: %w", err)
	}
	w.upstream = host.LocalAddr().(*net.UDPAddr).AddrPort()
	var inWorld []net.PacketConn
	var httpLn net.Listener
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends in the new namespace, and a
		// goroutine that exits while locked takes its thread with it.
		runtime.LockOSThread()
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("new network namespace: %w", err)
			}
			ns, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				return err
			}
			w.ns = ns
			lo, err := netlink.LinkByName("lo")
			if err == nil {
				err = netlink.LinkSetUp(lo)
			}
			for _, a := range []netip.Addr{jobDNSAddr, jobHTTPAddr} {
				if err == nil {
					err = netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}})
				}
			}
			if err != nil {
				return fmt.Errorf("loopback of the job world: %w", err)
			}
			for _, ap := range []netip.AddrPort{netip.AddrPortFrom(jobDNSAddr, 53), w.upstream} {
				pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
				if err != nil {
					return fmt.Errorf("job world: stub on %s: %w", ap, err)
				}
				inWorld = append(inWorld, pc)
			}
			httpLn, err = net.Listen("tcp", netip.AddrPortFrom(jobHTTPAddr, 80).String())
			return err
		}()
	}()
	if err := <-errc; err != nil {
		host.Close()
		for _, pc := range inWorld {
			pc.Close()
		}
		if w.ns != nil {
			w.ns.Close()
		}
		return nil, err
	}
	for _, pc := range append(inWorld, host) {
		srv := &dns.Server{PacketConn: pc, Handler: w}
		w.dnsSrv = append(w.dnsSrv, srv)
		go func() { _ = srv.ActivateAndServe() }()
	}
	w.httpSrv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		w.requests.Add(1)
		_, _ = io.WriteString(rw, "ok\n")
	})}
	go func() { _ = w.httpSrv.Serve(httpLn) }()
	w.resolv = filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(w.resolv, []byte("nameserver "+jobDNSAddr.String()+"\n"), 0o644); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *jobWorld) close() {
	for _, s := range w.dnsSrv {
		_ = s.Shutdown()
	}
	if w.httpSrv != nil {
		_ = w.httpSrv.Close()
	}
	if w.ns != nil {
		w.ns.Close()
	}
}

// ServeDNS answers, after the world's delay, A queries in dnsZone with
// jobHTTPAddr and every other type there with no data and an SOA (a
// negative answer a resolver may cache); names outside it get NXDOMAIN.
func (w *jobWorld) ServeDNS(rw dns.ResponseWriter, req *dns.Msg) {
	w.queries.Add(1)
	if d := time.Duration(w.delay.Load()); d > 0 {
		time.Sleep(d)
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative, m.RecursionAvailable = true, true
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: dnsZone + ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
		Ns: "ns." + dnsZone + ".", Mbox: "hostmaster." + dnsZone + ".", Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 60}
	switch {
	case len(req.Question) != 1 || !inZone(req.Question[0].Name):
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{soa}
	case req.Question[0].Qtype == dns.TypeA:
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: dnsStubTTL}, A: jobHTTPAddr.AsSlice()}}
	default:
		m.Ns = []dns.RR{soa}
	}
	_ = rw.WriteMsg(m)
}

// prepare runs on the thread that clones a job, as root: into the job
// world's network namespace and a mount namespace of the job's own in
// which /etc/resolv.conf names the world's stub.
func (w *jobWorld) prepare() error {
	if err := unix.Setns(int(w.ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("join the job world: %w", err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("new mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if err := unix.Mount(w.resolv, "/etc/resolv.conf", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the job world's resolv.conf: %w", err)
	}
	return nil
}

// jobSpawner starts a job with the world's prepare step.
type jobSpawner func(cmd *exec.Cmd, prepare func() error) error

// measureJobs runs the realistic jobs on an instance of its own.
func measureJobs(ctx context.Context, instance string, rounds int) (*jobsResult, error) {
	until := time.Now().Add(jobsBudget)
	inst := instance + "-jobs"
	cfg := enforcer.Config{CgroupName: inst, PinDir: "/sys/fs/bpf/" + inst, StateDir: "/run/" + inst}
	if err := enforcer.Cleanup(cfg); err != nil {
		return nil, fmt.Errorf("remove leftovers of instance %s: %w", inst, err)
	}
	defer func() {
		if err := enforcer.Cleanup(cfg); err != nil {
			fmt.Fprintf(os.Stderr, "bench: cleaning up instance %s: %v\n", inst, err)
		}
	}()
	tmp, err := os.MkdirTemp("", "sluice-bench-jobs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	worker, err := buildWorker(ctx, tmp)
	if err != nil {
		return nil, err
	}
	world, err := startJobWorld(tmp)
	if err != nil {
		return nil, err
	}
	defer world.close()

	free, err := openFreeCgroup(inst + "-free")
	if err != nil {
		return nil, err
	}
	defer free.Close()
	e, err := enforcer.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("open the enforcer: %w", err)
	}
	defer e.Close()
	policy, err := allowlist.FromStrings([]string{"*." + dnsZone})
	if err != nil {
		return nil, err
	}
	spawners := []jobSpawner{func(cmd *exec.Cmd, prepare func() error) error {
		return free.sess.StartWith(cmd, nobody, prepare)
	}}
	unchecked, err := allowlist.Parse([]byte(`{"allowed_hosts": [{"host": "*.` + dnsZone + `", "verify": "address"}]}`))
	if err != nil {
		return nil, err
	}
	for i, path := range []enforcer.DNSPath{enforcer.DNSPathAuto, enforcer.DNSPathResolver, enforcer.DNSPathKernel, enforcer.DNSPathResolver} {
		policy := policy
		if i+1 == jobArmUnchecked {
			policy = unchecked
		}
		s, err := e.NewSession(enforcer.Options{Policy: policy, NetNS: world.ns, DNS: &enforcer.DNSOptions{
			Path: path, Upstreams: []string{world.upstream.String()}}})
		if err != nil {
			return nil, fmt.Errorf("%s-path session: %w", path, err)
		}
		defer s.Close()
		if path != enforcer.DNSPathResolver && !s.KernelDNS() {
			return nil, fmt.Errorf("the %s-path session has no kernel DNS path: %v", path, s.KernelDNSError())
		}
		spawners = append(spawners, func(cmd *exec.Cmd, prepare func() error) error {
			return s.SpawnWith(cmd, nobody, prepare)
		})
	}

	// The stub and the HTTP server are this process: as in the DNS part,
	// its threads get the worker's priority for the part, or other work on
	// the machine would delay their answers and add to every arm's time.
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return nil, fmt.Errorf("priority: %w", err)
	}
	if err := setThreadsNice(workerNice); err != nil {
		fmt.Fprintf(os.Stderr, "bench: realistic jobs' servers at nice %d: %v\n", 20-prio, err)
	}
	defer func() {
		if err := setThreadsNice(20 - prio); err != nil {
			fmt.Fprintf(os.Stderr, "bench: restoring the priority after the realistic jobs: %v\n", err)
		}
	}()

	res := &jobsResult{times: map[time.Duration][][][]float64{}}
	for _, d := range jobDelays {
		res.times[d] = make([][][]float64, len(jobSpecs))
		for j := range jobSpecs {
			res.times[d][j] = make([][]float64, len(jobArms))
		}
	}
	order := make([]int, len(jobArms))
	for i := range order {
		order[i] = i
	}
	res.rounds, err = roundsWithin(rounds, until, func(r int) error {
		for di, d := range jobDelays {
			world.delay.Store(int64(d))
			for j, spec := range jobSpecs {
				for _, a := range order {
					prefix := fmt.Sprintf("r%dd%dj%da%d", r, di, j, a)
					before := world.requests.Load()
					ns, err := runJob(ctx, spawners[a], world, worker, spec, prefix)
					if err != nil {
						return fmt.Errorf("%s, %s upstream, %s arm: %w", spec.op, d, jobArms[a], err)
					}
					// Judged by what the world recorded, not the job's word.
					if got := world.requests.Load() - before; got != uint64(spec.requests) {
						return fmt.Errorf("%s, %s arm: the HTTP server saw %d requests, want %d", spec.op, jobArms[a], got, spec.requests)
					}
					res.times[d][j][a] = append(res.times[d][j][a], ns)
				}
				var arms []string
				for a, name := range jobArms {
					arms = append(arms, name+" "+fmtNS(last(res.times[d][j][a])))
				}
				fmt.Fprintf(os.Stderr, "bench: realistic jobs round %d, %s, %d ms upstream: %s\n", r+1, spec.op, d.Milliseconds(), strings.Join(arms, ", "))
			}
		}
		slices.Reverse(order)
		return nil
	})
	res.stubQueries, res.httpRequests = world.queries.Load(), world.requests.Load()
	if err != nil {
		return nil, fmt.Errorf("realistic jobs: %w", err)
	}
	return res, nil
}

func last(xs []float64) float64 { return xs[len(xs)-1] }

// runJob runs one job in one arm and returns its wall time in ns, as the
// job measured it (from its first request to its last answer).
func runJob(ctx context.Context, spawn jobSpawner, w *jobWorld, worker string, spec jobSpec, prefix string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, workerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, worker, "-op", spec.op, "-requests", strconv.Itoa(spec.requests),
		"-names-n", strconv.Itoa(spec.names), "-prefix", prefix, "-zone", dnsZone)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := spawn(cmd, w.prepare); err != nil {
		return 0, fmt.Errorf("start the job: %w", err)
	}
	_ = unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, workerNice)
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("the job: %w%s", err, quoteOutput(stderr.String()))
	}
	ns, err := strconv.ParseFloat(strings.TrimSpace(stdout.String()), 64)
	if err != nil || ns <= 0 {
		return 0, fmt.Errorf("the job printed %q, want ns", stdout.String())
	}
	return ns, nil
}

// missed reports whether the default path missed a target.
func (j *jobsResult) missed() bool {
	for d, max := range jobTargets {
		for ji := range jobSpecs {
			if median(j.ratios(d, ji, 1)) > max {
				return true
			}
		}
	}
	return false
}

// ratios are arm a's per-round ratios to the unconfined arm.
func (j *jobsResult) ratios(d time.Duration, job, a int) []float64 {
	t := j.times[d][job]
	s := series{a: t[0], b: t[a]}
	return s.ratios()
}

// write prints the side-by-side table: median wall time per arm and the
// median ratio to unconfined (min–max over the rounds).
func (j *jobsResult) write(w io.Writer) {
	fmt.Fprintf(w, "| realistic job | upstream | %s | target | default | names unchecked |\n", strings.Join(jobArms, " | "))
	fmt.Fprintf(w, "| --- | ---: |%s ---: | --- | --- |\n", strings.Repeat(" ---: |", len(jobArms)))
	for _, d := range jobDelays {
		for ji, spec := range jobSpecs {
			t := j.times[d][ji]
			cells := []string{spec.what, fmt.Sprintf("%d ms", d.Milliseconds()), fmtSeconds(median(t[0]))}
			for a := 1; a < len(jobArms); a++ {
				r := j.ratios(d, ji, a)
				cells = append(cells, fmt.Sprintf("%s (%.2f×, %.2f–%.2f)", fmtSeconds(median(t[a])), median(r), slices.Min(r), slices.Max(r)))
			}
			max := jobTargets[d]
			cells = append(cells, fmt.Sprintf("≤ %.2f×", max), verdict(median(j.ratios(d, ji, 1)) <= max),
				verdict(median(j.ratios(d, ji, jobArmUnchecked)) <= max))
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
	}
}

func fmtSeconds(ns float64) string { return fmt.Sprintf("%.2f s", ns/1e9) }

func (j *jobsResult) describe(w io.Writer) {
	fmt.Fprintf(w, "Realistic jobs: %d rounds, the five arms in an order that alternates; each job a process as uid 65534 in a network namespace of its own "+
		"(loopback only: a stub upstream on %s:53 that waits 5 ms or 0 ms and sends SOA with its negative answers, every AAAA here, and an HTTP server on %s:80), "+
		"its /etc/resolv.conf naming the stub; each run asks names of its own (no cache carries over). Times: the job's wall time, medians; ratios: to the same round's unconfined run. "+
		"The world recorded %d DNS queries and %d HTTP requests.\n", j.rounds, jobDNSAddr, jobHTTPAddr, j.stubQueries, j.httpRequests)
}

// benchJobsOnly is `-only jobs`.
func benchJobsOnly(ctx context.Context, o options) (missed bool, err error) {
	loadBefore := loadAverage()
	j, err := measureJobs(ctx, o.instance, o.jobsRounds)
	if err != nil {
		return false, err
	}
	sluice, _ := filepath.Abs(o.sluice)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "%s; load average %s at start, %s at end\n\n", machineSummary(sluice), loadBefore, loadAverage())
	j.write(w)
	fmt.Fprintln(w)
	j.describe(w)
	return j.missed(), nil
}
