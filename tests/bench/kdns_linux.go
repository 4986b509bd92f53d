// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/enforcer"
)

// Targets of the kernel DNS path (issue 13), against DNS asked directly.
const (
	kdnsMinUniqueRatio = 0.9
	kdnsMinRepeatRatio = 0.9
	kdnsMaxAddedP99    = 100 * time.Microsecond // at 5,000 queries per second
	kdnsRate           = 5000
	// kdnsBudget bounds the part with the default -kdns-rounds.
	kdnsBudget = 150 * time.Second
)

// kdnsResult compares the two DNS paths of a real session, measured the
// same way: the worker's DNS load generator (-op dns), as uid 65534, run
// unconfined against the stub upstream (arm A), and inside a session whose
// UDP DNS takes the kernel path (K), the resolver path (R) or the default,
// auto (D: the resolver path, with the kernel path as its failover, whose
// hooks look the resolver's socket up at every send), asking 127.0.0.1:53,
// which the datapath redirects. Every round runs the four arms, in an
// order that alternates.
type kdnsResult struct {
	rounds                     int
	caseDur                    time.Duration
	kUnique, kRepeated         series // qps, A and K
	rUnique, rRepeated         series // qps, A and R
	kP99, kP50, rP99, rP50     series // ns at kdnsRate, A and K / A and R
	dUnique, dRepeated         series // qps, A and D
	dP99, dP50                 series // ns at kdnsRate, A and D
	lostD                      int
	bpfEgressNS, bpfIngressNS  float64
	bpfQueries                 uint64
	lostA, lostK, lostR, sentK int
}

// kdnsArm is one arm: where the worker runs and what it asks.
type kdnsArm struct {
	name   string
	start  starter
	target netip.AddrPort
}

// measureKDNS runs the comparison on an instance of its own.
func measureKDNS(ctx context.Context, instance string, rounds int, caseDur time.Duration) (*kdnsResult, error) {
	inst := instance + "-kdns"
	cfg := enforcer.Config{CgroupName: inst, PinDir: "/sys/fs/bpf/" + inst, StateDir: "/run/" + inst}
	if err := enforcer.Cleanup(cfg); err != nil {
		return nil, fmt.Errorf("remove leftovers of instance %s: %w", inst, err)
	}
	defer func() {
		if err := enforcer.Cleanup(cfg); err != nil {
			fmt.Fprintf(os.Stderr, "bench: cleaning up instance %s: %v\n", inst, err)
		}
	}()
	tmp, err := os.MkdirTemp("", "sluice-bench-kdns-")
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
	stub, err := startStub()
	if err != nil {
		return nil, err
	}
	defer stub.close()

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
	session := func(path enforcer.DNSPath) (*enforcer.Session, error) {
		return e.NewSession(enforcer.Options{Policy: policy, DNS: &enforcer.DNSOptions{
			Path: path, Upstreams: []string{stub.addr.String()}}})
	}
	ks, err := session(enforcer.DNSPathKernel)
	if err != nil {
		return nil, fmt.Errorf("kernel-path session: %w", err)
	}
	defer ks.Close()
	if !ks.KernelDNS() {
		return nil, fmt.Errorf("the session is not on the kernel DNS path: %v", ks.KernelDNSError())
	}
	rs, err := session(enforcer.DNSPathResolver)
	if err != nil {
		return nil, fmt.Errorf("resolver-path session: %w", err)
	}
	defer rs.Close()
	ds, err := session(enforcer.DNSPathAuto)
	if err != nil {
		return nil, fmt.Errorf("auto-path session: %w", err)
	}
	defer ds.Close()
	if !ds.DNSFailover() {
		return nil, fmt.Errorf("the session has no kernel DNS failover: %v", ds.KernelDNSError())
	}

	redirected := netip.MustParseAddrPort("127.0.0.1:53")
	arms := []kdnsArm{
		{"A", free.sess, stub.addr},
		{"K", confinedArm{ks}, redirected},
		{"R", confinedArm{rs}, redirected},
		{"D", confinedArm{ds}, redirected},
	}
	res := &kdnsResult{caseDur: caseDur}
	for r := range rounds {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		order := slices.Clone(arms)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		got := map[string][3]dnsReportJSON{}
		for _, a := range order {
			var out [3]dnsReportJSON
			for i, args := range [][]string{
				{"-mode", "closed", "-names", "unique"},
				{"-mode", "closed", "-names", "repeated"},
				{"-mode", "open", "-names", "unique", "-rate", fmt.Sprint(kdnsRate)},
			} {
				rep, err := runDNSWorker(ctx, a.start, worker, a.target, caseDur, args...)
				if err != nil {
					return nil, fmt.Errorf("arm %s: %w", a.name, err)
				}
				out[i] = rep
			}
			got[a.name] = out
		}
		A, K, R, D := got["A"], got["K"], got["R"], got["D"]
		res.dUnique.add(A[0].QPS, D[0].QPS)
		res.dRepeated.add(A[1].QPS, D[1].QPS)
		res.dP99.add(float64(A[2].P99ns), float64(D[2].P99ns))
		res.dP50.add(float64(A[2].P50ns), float64(D[2].P50ns))
		res.kUnique.add(A[0].QPS, K[0].QPS)
		res.kRepeated.add(A[1].QPS, K[1].QPS)
		res.rUnique.add(A[0].QPS, R[0].QPS)
		res.rRepeated.add(A[1].QPS, R[1].QPS)
		res.kP99.add(float64(A[2].P99ns), float64(K[2].P99ns))
		res.kP50.add(float64(A[2].P50ns), float64(K[2].P50ns))
		res.rP99.add(float64(A[2].P99ns), float64(R[2].P99ns))
		res.rP50.add(float64(A[2].P50ns), float64(R[2].P50ns))
		for i := range 3 {
			res.lostA += A[i].Lost
			res.lostK += K[i].Lost
			res.lostR += R[i].Lost
			res.lostD += D[i].Lost
			res.sentK += K[i].Sent
		}
		res.rounds++
		fmt.Fprintf(os.Stderr, "bench: kernel DNS round %d: unique A %s K %s R %s D %s; repeated A %s K %s R %s D %s; p99 at %d qps A %s K %s R %s D %s\n",
			r+1, fmtQPS(A[0].QPS), fmtQPS(K[0].QPS), fmtQPS(R[0].QPS), fmtQPS(D[0].QPS), fmtQPS(A[1].QPS), fmtQPS(K[1].QPS), fmtQPS(R[1].QPS), fmtQPS(D[1].QPS),
			kdnsRate, fmtNS(float64(A[2].P99ns)), fmtNS(float64(K[2].P99ns)), fmtNS(float64(R[2].P99ns)), fmtNS(float64(D[2].P99ns)))
	}

	// The programs' own cost, with the kernel's statistics on for one
	// more closed-loop run of the kernel arm only (counting costs a little,
	// so the rounds above ran without it).
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enable BPF statistics: %w", err)
	}
	defer stats.Close()
	e0, i0, err := e.Datapath().KDNSProgramStats()
	if err != nil {
		return nil, err
	}
	if _, err := runDNSWorker(ctx, arms[1].start, worker, redirected, caseDur, "-mode", "closed", "-names", "unique"); err != nil {
		return nil, err
	}
	e1, i1, err := e.Datapath().KDNSProgramStats()
	if err != nil {
		return nil, err
	}
	if n := e1.RunCount - e0.RunCount; n > 0 {
		res.bpfEgressNS = float64(e1.Runtime-e0.Runtime) / float64(n)
		res.bpfQueries = n
	}
	if n := i1.RunCount - i0.RunCount; n > 0 {
		res.bpfIngressNS = float64(i1.Runtime-i0.Runtime) / float64(n)
	}
	return res, nil
}

// dnsReportJSON is what the worker's -op dns prints.
type dnsReportJSON struct {
	Sent  int     `json:"sent"`
	Good  int     `json:"good"`
	Lost  int     `json:"lost"`
	QPS   float64 `json:"qps"`
	P50ns int64   `json:"p50_ns"`
	P99ns int64   `json:"p99_ns"`
}

func runDNSWorker(ctx context.Context, s starter, worker string, target netip.AddrPort, dur time.Duration, args ...string) (dnsReportJSON, error) {
	ctx, cancel := context.WithTimeout(ctx, workerTimeout)
	defer cancel()
	args = append([]string{"-op", "dns", "-addrs", target.String(), "-dur", dur.String()}, args...)
	cmd := exec.CommandContext(ctx, worker, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	what := "worker " + strings.Join(args, " ")
	if err := s.Start(cmd, nobody); err != nil {
		return dnsReportJSON{}, fmt.Errorf("start %s: %w", what, err)
	}
	_ = unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, workerNice)
	if err := cmd.Wait(); err != nil {
		return dnsReportJSON{}, fmt.Errorf("%s: %w%s", what, err, quoteOutput(stderr.String()))
	}
	var rep dnsReportJSON
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return rep, fmt.Errorf("%s printed %q: %w", what, stdout.String(), err)
	}
	if rep.Sent == 0 || float64(rep.Sent-rep.Good) > dnsMaxBad*float64(rep.Sent) && !strings.Contains(what, "-mode open") {
		return rep, fmt.Errorf("%s: %d of %d queries unanswered or failed", what, rep.Sent-rep.Good, rep.Sent)
	}
	return rep, nil
}

func (k *kdnsResult) rows() []tableRow {
	info := func(r tableRow) tableRow {
		r.target, r.result = "—", "report only"
		return r
	}
	kp99 := addedRow(fmt.Sprintf("DNS kernel path: p99 added, open loop at %s", fmtQPS(kdnsRate)), &k.kP99, kdnsMaxAddedP99)
	return []tableRow{
		info(qpsRow("DNS default path (auto): qps, unique names (B through the session's resolver, its socket looked up at each send)", &k.dUnique, 0)),
		info(qpsRow("DNS default path (auto): qps, 100 repeated names (the resolver's cache)", &k.dRepeated, 0)),
		addedInfoRow(fmt.Sprintf("DNS default path (auto): p99 added, open loop at %s", fmtQPS(kdnsRate)), &k.dP99),
		addedInfoRow(fmt.Sprintf("DNS default path (auto): p50 added at %s", fmtQPS(kdnsRate)), &k.dP50),
		qpsRow("DNS kernel path: qps, unique names (B straight to the upstream)", &k.kUnique, kdnsMinUniqueRatio),
		info(qpsRow("DNS resolver path: qps, unique names (B through the session's resolver)", &k.rUnique, 0)),
		qpsRow("DNS kernel path: qps, 100 repeated names (no cache)", &k.kRepeated, kdnsMinRepeatRatio),
		info(qpsRow("DNS resolver path: qps, 100 repeated names (the resolver's cache)", &k.rRepeated, 0)),
		kp99,
		addedInfoRow(fmt.Sprintf("DNS resolver path: p99 added, open loop at %s", fmtQPS(kdnsRate)), &k.rP99),
		addedInfoRow(fmt.Sprintf("DNS kernel path: p50 added at %s", fmtQPS(kdnsRate)), &k.kP50),
		addedInfoRow(fmt.Sprintf("DNS resolver path: p50 added at %s", fmtQPS(kdnsRate)), &k.rP50),
		{bench: "DNS kernel path: BPF per query (the datapath's egress program with its tail call to the judge, + ingress program)", b: fmtNS(k.bpfEgressNS + k.bpfIngressNS),
			cmp: fmt.Sprintf("%s + %s over %d queries", fmtNS(k.bpfEgressNS), fmtNS(k.bpfIngressNS), k.bpfQueries), target: "—", result: "report only"},
	}
}

func (k *kdnsResult) missed() bool {
	return median(k.kUnique.ratios()) < kdnsMinUniqueRatio || median(k.kRepeated.ratios()) < kdnsMinRepeatRatio ||
		median(k.kP99.added()) >= float64(kdnsMaxAddedP99)
}

// benchKDNSOnly is `-only kdns`.
func benchKDNSOnly(ctx context.Context, o options) (missed bool, err error) {
	loadBefore := loadAverage()
	k, err := measureKDNS(ctx, o.instance, o.kdnsRounds, o.kdnsDur)
	if err != nil {
		return false, err
	}
	sluice, _ := filepath.Abs(o.sluice)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "%s; load average %s at start, %s at end\n\n", machineSummary(sluice), loadBefore, loadAverage())
	writeTable(w, k.rows())
	fmt.Fprintln(w)
	k.describe(w)
	return k.missed(), nil
}

func (k *kdnsResult) describe(w io.Writer) {
	fmt.Fprintf(w, "DNS paths: %d rounds of four arms (A unconfined, B kernel path, B resolver path, B default path auto), the load generator a separate process as uid 65534, 64 queries in flight, %s per case; the stub upstream on 127.0.0.1. Lost queries: A %d, kernel %d of %d sent, resolver %d, auto %d.\n",
		k.rounds, k.caseDur, k.lostA, k.lostK, k.sentK, k.lostR, k.lostD)
}
