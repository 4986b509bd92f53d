// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/dnsresolver"
)

// Targets of the DNS benchmark (issue 3).
const (
	dnsMinUniqueRatio = 0.6              // qps through sluice / direct, unique names
	dnsMinCachedRatio = 1.0              // the same, repeated names answered from sluice's cache
	dnsMaxAddedP99    = time.Millisecond // p99 through sluice - p99 direct, at half the direct peak
)

const (
	// dnsWarmup is the unmeasured start of every arm, while sockets,
	// goroutines and the CPU frequency settle.
	dnsWarmup = 250 * time.Millisecond
	// dnsRepeatedNames is the size of the repeated-names set.
	dnsRepeatedNames = 100
	// dnsStubTTL is the TTL of the stub's answers: long enough that no
	// cached answer expires during the benchmark.
	dnsStubTTL = 300
	// dnsModerateRate is the open-loop rate of the third latency case:
	// far from either peak, it shows what sluice adds to a query when the
	// machine is not saturated (an agent's own rate is a few queries a
	// second; a busy CI runner's some hundreds).
	dnsModerateRate = 5000
	// dnsMaxBad is the fraction of lost or failed queries in an arm above
	// which its figures mean nothing and the benchmark fails.
	dnsMaxBad = 0.01
)

// dnsResult is what the DNS benchmark measured; in every series A is
// straight to the stub and B through sluice's resolver.
type dnsResult struct {
	opts        dnsOptions
	rounds      int
	unique      series     // qps, closed loop
	repeated    series     // qps, closed loop
	cpuUnique   series     // process CPU ns per answered query, closed loop
	cpuRepeated series     // the same
	atDirect    dnsLatency // at half the direct unique-names peak
	atSluice    dnsLatency // at half sluice's unique-names peak
	atModerate  dnsLatency // at dnsModerateRate
	closed      armCounts
	open        armCounts
	learns      uint64
	forwarded   uint64 // through sluice, unique names
	cached      uint64 // answered from sluice's cache, repeated names
	missedCache uint64 // repeated names forwarded after all
	nice        int    // of the process's threads while measuring
}

// armCounts add up queries over the rounds, per arm A and B.
type armCounts struct {
	sent   [2]int
	lost   [2]int // no reply within dnsQueryTimeout
	failed [2]int // a reply, but not a NOERROR answer
}

// dnsLatency is an open-loop latency case, unique names; series in ns.
type dnsLatency struct {
	rates    []float64 // asked, per round
	sent     series    // qps actually sent
	p50, p99 series
}

// dnsCase is one case of the DNS benchmark, run in both arms.
type dnsCase struct {
	what string
	open bool // open loop: losses are a result, not a fault
	run  func(to netip.AddrPort) (loadResult, error)
	// warm, if set, prepares the sluice arm, unmeasured.
	warm func() error
	// check, if set, vets the sluice arm given what the resolver forwarded
	// and answered from its cache during it.
	check func(forwarded, cached uint64, l loadResult) error
}

// countingLearner stands in for the datapath: the resolver's learning runs
// in full, but the kernel map update does not (it is the datapath's cost,
// measured with the datapath, not the resolver's).
type countingLearner struct{ learns, forgets atomic.Uint64 }

func (l *countingLearner) Learn(netip.Addr, time.Duration) error {
	l.learns.Add(1)
	return nil
}

func (l *countingLearner) Forget(netip.Addr) error {
	l.forgets.Add(1)
	return nil
}

// benchDNSOnly is `-only dns`: the DNS benchmark alone, printed as the
// whole benchmark is, in far less time and without root.
func benchDNSOnly(ctx context.Context, o options) (missed bool, err error) {
	loadBefore := loadAverage()
	d, err := measureDNS(ctx, o.dnsOpts)
	if err != nil {
		return false, err
	}
	// The sluice binary only names the version in the machine line.
	sluice, _ := filepath.Abs(o.sluice)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "%s; load average %s at start, %s at end\n\n", machineSummary(sluice), loadBefore, loadAverage())
	writeTable(w, d.rows())
	fmt.Fprintln(w)
	d.describe(w)
	return d.missed(), nil
}

// measureDNS runs the DNS benchmark: up to o.rounds rounds, each measuring
// unique names, repeated names and latency in both arms, within dnsBudget.
func measureDNS(ctx context.Context, o dnsOptions) (*dnsResult, error) {
	until := time.Now().Add(dnsBudget)
	stub, err := startStub()
	if err != nil {
		return nil, err
	}
	defer stub.close()

	policy, err := allowlist.FromStrings([]string{"*." + dnsZone})
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	learner := &countingLearner{}
	// Grace as `sluice run` and `sluice daemon` set it by default: the
	// library's zero value means no grace at all, which would make every
	// answer extend its addresses' expiry (a map update each in the kernel).
	res, err := dnsresolver.New(dnsresolver.Config{Policy: policy, Upstreams: []string{stub.addr.String()}, Learner: learner, Grace: dnsresolver.DefaultGrace})
	if err != nil {
		return nil, fmt.Errorf("resolver: %w", err)
	}
	if err := res.ListenLoopback(); err != nil {
		return nil, fmt.Errorf("resolver: %w", err)
	}
	defer res.Close()
	port4, _ := res.Ports()
	viaSluice := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port4)

	// The worker benchmarks run their worker at workerNice, for the same
	// reason: other work on the machine is the main source of noise. Here
	// generator, resolver and stub are this process, so it is this
	// process's threads that get it, for the DNS part only.
	// The raw system call answers 20 - nice, to stay positive.
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return nil, fmt.Errorf("priority: %w", err)
	}
	d := &dnsResult{opts: o, nice: 20 - prio}
	if err := setThreadsNice(workerNice); err != nil {
		fmt.Fprintf(os.Stderr, "bench: DNS part at nice %d: %v\n", d.nice, err)
	} else {
		d.nice = workerNice
	}
	defer func() {
		if err := setThreadsNice(20 - prio); err != nil {
			fmt.Fprintf(os.Stderr, "bench: restoring the priority after the DNS part: %v\n", err)
		}
	}()

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return nil, fmt.Errorf("-dns-cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, fmt.Errorf("-dns-cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	names := make([]string, dnsRepeatedNames)
	for i := range names {
		names[i] = fmt.Sprintf("name%02d.%s", i, dnsZone)
	}
	unique := func(int) *queryGen { return newUniqueGen() }
	repeated := func(w int) *queryGen { return newRepeatedGen(names, w*len(names)/o.workers) }
	stats := res.Stats()
	// settle waits until the work of the arm before is done (an arm that
	// overloaded the resolver leaves a backlog behind it), then collects
	// the garbage, so that no arm pays for the one before.
	settle := func() {
		activity := func() uint64 {
			return stats.Forwarded.Load() + stats.Cached.Load() + stats.Servfail.Load() + stats.Refused.Load() + stub.queries.Load()
		}
		last, still := activity(), 0
		for end := time.Now().Add(10 * time.Second); still < 2 && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
			if a := activity(); a != last {
				last, still = a, 0
			} else {
				still++
			}
		}
		runtime.GC()
	}
	// both runs one case's direct arm A and sluice arm B in the round's
	// order and vets them.
	both := func(r int, c dnsCase) (loadResult, loadResult, error) {
		direct := func() (loadResult, error) {
			settle()
			fmt.Fprintf(os.Stderr, "bench: DNS round %d/%d, %s, direct: ", r+1, o.rounds, c.what)
			l, err := c.run(stub.addr)
			progress(l, err)
			return l, err
		}
		via := func() (loadResult, error) {
			settle()
			fmt.Fprintf(os.Stderr, "bench: DNS round %d/%d, %s, through sluice: ", r+1, o.rounds, c.what)
			if c.warm != nil {
				if err := c.warm(); err != nil {
					progress(loadResult{}, err)
					return loadResult{}, err
				}
			}
			fwd, cached := stats.Forwarded.Load(), stats.Cached.Load()
			l, err := c.run(viaSluice)
			if err == nil && c.check != nil {
				err = c.check(stats.Forwarded.Load()-fwd, stats.Cached.Load()-cached, l)
			}
			progress(l, err)
			return l, err
		}
		la, lb, err := pair(r, direct, via)
		if err != nil {
			return la, lb, fmt.Errorf("%s: %w", c.what, err)
		}
		for i, l := range []loadResult{la, lb} {
			// Open loop at a rate the path cannot sustain loses queries;
			// that is a result (they count in the latency), not a fault.
			if bad := l.lost + l.failed; !c.open && float64(bad) > dnsMaxBad*float64(max(l.sent, 1)) {
				return la, lb, fmt.Errorf("%s, arm %c: %d of %d queries lost and %d failed: the figures would mean nothing", c.what, 'A'+i, l.lost, l.sent, l.failed)
			}
			t := &d.closed
			if c.open {
				t = &d.open
			}
			t.sent[i] += l.sent
			t.lost[i] += l.lost
			t.failed[i] += l.failed
		}
		return la, lb, nil
	}

	d.rounds, err = roundsWithin(o.rounds, until, func(r int) error {
		a, b, err := both(r, dnsCase{
			what: "unique names",
			run: func(to netip.AddrPort) (loadResult, error) {
				return closedLoop(ctx, to, o.workers, o.dur, unique)
			},
			check: func(fwd, _ uint64, l loadResult) error {
				// Proof that the answers were forwarded, not cached.
				if fwd < uint64(l.good) {
					return fmt.Errorf("sluice forwarded %d queries, fewer than the %d answered", fwd, l.good)
				}
				d.forwarded += fwd
				return nil
			},
		})
		if err != nil {
			return err
		}
		d.unique.add(a.qps(), b.qps())
		d.cpuUnique.add(a.cpuPerQuery(), b.cpuPerQuery())

		a, b, err = both(r, dnsCase{
			what: "repeated names",
			run: func(to netip.AddrPort) (loadResult, error) {
				return closedLoop(ctx, to, o.workers, o.dur, repeated)
			},
			// Every round: the unique names since the last may have
			// pushed these out of the bounded cache.
			warm: func() error { return warmNames(ctx, viaSluice, names) },
			check: func(fwd, cached uint64, l loadResult) error {
				// Proof that sluice answered from its cache. A few misses
				// are sluice's own: its full cache evicts an arbitrary
				// entry for each new one, now and then a warmed name,
				// which the next query for it brings back.
				if float64(fwd) > dnsMaxBad*float64(l.good) {
					return fmt.Errorf("sluice forwarded %d of %d repeated queries: its cache did not answer them", fwd, l.good)
				}
				d.cached += cached
				d.missedCache += fwd
				return nil
			},
		})
		if err != nil {
			return err
		}
		d.repeated.add(a.qps(), b.qps())
		d.cpuRepeated.add(a.cpuPerQuery(), b.cpuPerQuery())

		// The target's rate, then one sluice can sustain: a path
		// overloaded at the first only queues, and the second shows what
		// it adds per query when it is not.
		for _, l := range []*dnsLatency{&d.atDirect, &d.atSluice, &d.atModerate} {
			rate := median(d.unique.a) / 2
			switch l {
			case &d.atSluice:
				rate = median(d.unique.b) / 2
			case &d.atModerate:
				rate = dnsModerateRate
			}
			l.rates = append(l.rates, rate)
			a, b, err := both(r, dnsCase{
				what: fmt.Sprintf("latency at %s", fmtQPS(rate)),
				open: true,
				run: func(to netip.AddrPort) (loadResult, error) {
					return openLoop(ctx, to, o.senders, rate, o.dur, unique)
				},
			})
			if err != nil {
				return err
			}
			l.p50.add(float64(percentile(a.lat, 50)), float64(percentile(b.lat, 50)))
			l.p99.add(float64(percentile(a.lat, 99)), float64(percentile(b.lat, 99)))
			l.sent.add(a.sentQPS(), b.sentQPS())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("DNS benchmark: %w", err)
	}
	d.learns = learner.learns.Load()
	return d, nil
}

// progress finishes an arm's line on stderr.
func progress(l loadResult, err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "failed")
		return
	}
	fmt.Fprintf(os.Stderr, "%s answered, p50 %s, p99 %s, %d lost, %d failed\n",
		fmtQPS(l.qps()), fmtNS(float64(percentile(l.lat, 50))), fmtNS(float64(percentile(l.lat, 99))), l.lost, l.failed)
}

// rows are the DNS lines of the results table.
func (d *dnsResult) rows() []tableRow {
	return []tableRow{
		qpsRow("DNS queries per second, unique names (uncached: sluice forwards each)", &d.unique, dnsMinUniqueRatio),
		qpsRow(fmt.Sprintf("DNS queries per second, %d repeated names (sluice answers from its cache)", dnsRepeatedNames), &d.repeated, dnsMinCachedRatio),
		latencyRow(fmt.Sprintf("DNS p99 latency, unique names, open loop at %s (half the direct peak)", fmtQPS(median(d.atDirect.rates))), &d.atDirect.p99, dnsMaxAddedP99),
		latencyRow("DNS p50 latency, the same", &d.atDirect.p50, 0),
		latencyRow(fmt.Sprintf("DNS p99 latency, unique names, open loop at %s (half sluice's own peak)", fmtQPS(median(d.atSluice.rates))), &d.atSluice.p99, 0),
		latencyRow(fmt.Sprintf("DNS p99 latency, unique names, open loop at %s (neither path near its peak)", fmtQPS(dnsModerateRate)), &d.atModerate.p99, 0),
		latencyRow("DNS p50 latency, the same", &d.atModerate.p50, 0),
	}
}

// missed reports whether a DNS target was missed.
func (d *dnsResult) missed() bool {
	return median(d.unique.ratios()) < dnsMinUniqueRatio ||
		median(d.repeated.ratios()) < dnsMinCachedRatio ||
		latencyRow("", &d.atDirect.p99, dnsMaxAddedP99).result != verdict(true)
}

// describe says how the DNS rows were measured.
func (d *dnsResult) describe(w io.Writer) {
	o := d.opts
	rounds := fmt.Sprintf("%d rounds", d.rounds)
	if d.rounds < o.rounds {
		rounds = fmt.Sprintf("%d rounds (of %d asked: the machine was too slow for the DNS part's %s budget)", d.rounds, o.rounds, dnsBudget)
	}
	ns := func(xs []float64) string { return fmtNS(median(xs)) }
	qps := func(xs []float64) string { return fmtQPS(median(xs)) }
	fmt.Fprintf(w, "DNS rows: A asks a stub upstream directly (miekg/dns on 127.0.0.1, UDP, answering any *.%s name with one A record in 203.0.113.0/24, TTL %d s, at once); "+
		"B asks an in-process sluice resolver (dnsresolver, policy `*.%s`, default settings) that forwards to the same stub. "+
		"%s, arms alternating (A B, then B A), medians of the rounds; each arm runs %s after %s of unmeasured warm-up. "+
		"Queries per second: closed loop, %d sockets with one query in flight each; "+
		"CPU time of the whole process per answered query: unique names A %s, B %s; repeated names A %s, B %s. "+
		"Latency: open loop, %d sockets fed in turn by one pacer every %s, from the write to the reply's arrival; a query lost or failed counts as %s. "+
		"Queries are A, class IN, recursion desired, without EDNS0; unique names are `<16 random hex digits>.%s`; the %d repeated names are asked through sluice once before each round's B arm. "+
		"Generator, resolver and stub are one process at nice %d on the machine's %d CPUs (GOMAXPROCS %d), competing for them as a confined program, the sluice daemon and a local upstream would.\n\n",
		dnsZone, dnsStubTTL, dnsZone,
		rounds, o.dur, dnsWarmup,
		o.workers,
		ns(d.cpuUnique.a), ns(d.cpuUnique.b), ns(d.cpuRepeated.a), ns(d.cpuRepeated.b),
		o.senders, pacerTick, dnsQueryTimeout,
		dnsZone, dnsRepeatedNames,
		d.nice, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "The resolver learns through an in-memory fake learner (%d Learn calls, each a counted no-op): the kernel map update is not part of these figures; it is measured separately. "+
		"Through sluice, %d unique-name queries were forwarded; %d repeated-name queries were answered from the cache and %d forwarded after all (a full cache evicts an arbitrary entry for each new one, now and then a repeated name). "+
		"Rates actually sent in the latency arms, A / B: %s / %s, %s / %s and %s / %s. "+
		"Lost (no reply within %s) / failed: closed loop A %d / %d of %d, B %d / %d of %d; open loop A %d / %d of %d, B %d / %d of %d.\n",
		d.learns, d.forwarded, d.cached, d.missedCache,
		qps(d.atDirect.sent.a), qps(d.atDirect.sent.b), qps(d.atSluice.sent.a), qps(d.atSluice.sent.b), qps(d.atModerate.sent.a), qps(d.atModerate.sent.b),
		dnsQueryTimeout,
		d.closed.lost[0], d.closed.failed[0], d.closed.sent[0], d.closed.lost[1], d.closed.failed[1], d.closed.sent[1],
		d.open.lost[0], d.open.failed[0], d.open.sent[0], d.open.lost[1], d.open.failed[1], d.open.sent[1])
}

// stubUpstream is the upstream both arms end at. It answers from pooled
// messages and buffers so that the direct arm measures the path, not the
// stub's garbage.
type stubUpstream struct {
	srv     *dns.Server
	addr    netip.AddrPort
	pool    sync.Pool // of *stubReply
	queries atomic.Uint64
}

// stubReply is one reply's reusable parts.
type stubReply struct {
	msg dns.Msg
	a   dns.A
	ip  [4]byte
	opt dns.OPT
	buf []byte
}

func startStub() (*stubUpstream, error) {
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		return nil, fmt.Errorf("stub upstream: %w", err)
	}
	// A real upstream is another process, which the kernel schedules on
	// its own; this one shares the Go scheduler with the resolver's
	// goroutines, and with the default buffer it drops bursts that arrive
	// while its reader waits for a turn.
	if err := pc.SetReadBuffer(socketBuffer); err != nil {
		pc.Close()
		return nil, fmt.Errorf("stub upstream: %w", err)
	}
	s := &stubUpstream{addr: pc.LocalAddr().(*net.UDPAddr).AddrPort()}
	s.pool.New = func() any { return &stubReply{buf: make([]byte, dns.MinMsgSize)} }
	started := make(chan struct{})
	s.srv = &dns.Server{PacketConn: pc, Handler: s, NotifyStartedFunc: func() { close(started) }}
	failed := make(chan error, 1)
	go func() { failed <- s.srv.ActivateAndServe() }()
	select {
	case <-started:
		return s, nil
	case err := <-failed:
		pc.Close()
		return nil, fmt.Errorf("stub upstream: %w", err)
	}
}

func (s *stubUpstream) close() { _ = s.srv.Shutdown() }

// ServeDNS answers A queries for names in dnsZone with one documentation
// address, other types in the zone with no data, and the rest with
// NXDOMAIN.
func (s *stubUpstream) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	s.queries.Add(1)
	p := s.pool.Get().(*stubReply)
	defer s.pool.Put(p)
	m := &p.msg
	m.MsgHdr = dns.MsgHdr{Id: req.Id, Response: true, Opcode: req.Opcode, Authoritative: true,
		RecursionDesired: req.RecursionDesired, RecursionAvailable: true}
	m.Question = append(m.Question[:0], req.Question...)
	m.Answer, m.Ns, m.Extra = m.Answer[:0], m.Ns[:0], m.Extra[:0]
	if len(req.Question) != 1 || req.Question[0].Qclass != dns.ClassINET || !inZone(req.Question[0].Name) {
		m.Rcode = dns.RcodeNameError
	} else if q := req.Question[0]; q.Qtype == dns.TypeA {
		p.ip = stubAddr(q.Name)
		p.a = dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: dnsStubTTL}, A: p.ip[:]}
		m.Answer = append(m.Answer, &p.a)
	}
	if opt := req.IsEdns0(); opt != nil {
		p.opt = dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		p.opt.SetUDPSize(1232)
		m.Extra = append(m.Extra, &p.opt)
	}
	wire, err := m.PackBuffer(p.buf[:cap(p.buf)])
	if err != nil {
		return
	}
	p.buf = wire
	_, _ = w.Write(wire)
}

// warmNames asks each name once, so that sluice's cache holds them.
func warmNames(ctx context.Context, target netip.AddrPort, names []string) error {
	c := &dns.Client{Timeout: dnsQueryTimeout}
	for _, n := range names {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(n), dns.TypeA)
		r, _, err := c.ExchangeContext(ctx, m, target.String())
		if err != nil {
			return fmt.Errorf("warm %s: %w", n, err)
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			return fmt.Errorf("warm %s: %s with %d answers", n, dns.RcodeToString[r.Rcode], len(r.Answer))
		}
	}
	return nil
}

// queryGen produces one socket's queries: a fresh random name each time,
// or the repeated names in turn.
type queryGen struct {
	rng    *rand.Rand // nil: repeated names
	unique []byte     // the unique-name query, relabelled each time
	names  [][]byte   // the repeated names' queries
	next   int
}

func newUniqueGen() *queryGen {
	return &queryGen{
		rng:    rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		unique: appendQuery(nil, 0, strings.Repeat("0", uniqueLabelLen)+"."+dnsZone),
	}
}

// newRepeatedGen starts at names[first], so that sockets do not all ask the
// same name at once.
func newRepeatedGen(names []string, first int) *queryGen {
	g := &queryGen{names: make([][]byte, len(names)), next: first % len(names)}
	for i, n := range names {
		g.names[i] = appendQuery(nil, 0, n)
	}
	return g
}

// query returns the next query with ID id, valid until the next call.
func (g *queryGen) query(id uint16) []byte {
	var q []byte
	if g.rng != nil {
		q = g.unique
		setUniqueLabel(q, g.rng.Uint64())
	} else {
		q = g.names[g.next]
		g.next = (g.next + 1) % len(g.names)
	}
	setQueryID(q, id)
	return q
}

// loadResult is one arm's outcome, counting only queries sent in the
// measured window.
type loadResult struct {
	sent, good, failed, lost int
	window                   time.Duration
	cpu                      time.Duration   // the process's CPU time (user and system) in the window; closed loop only
	lat                      []time.Duration // of the good replies (open loop: also the rest, as dnsQueryTimeout); sorted once merged
}

func (l loadResult) qps() float64     { return float64(l.good) / l.window.Seconds() }
func (l loadResult) sentQPS() float64 { return float64(l.sent) / l.window.Seconds() }

// cpuPerQuery is in ns.
func (l loadResult) cpuPerQuery() float64 { return float64(l.cpu) / float64(max(l.good, 1)) }

// merge adds the per-socket results up and sorts the latencies.
func merge(parts []loadResult, window time.Duration) loadResult {
	out := loadResult{window: window}
	n := 0
	for _, p := range parts {
		n += len(p.lat)
	}
	out.lat = make([]time.Duration, 0, n)
	for _, p := range parts {
		out.sent += p.sent
		out.good += p.good
		out.failed += p.failed
		out.lost += p.lost
		out.lat = append(out.lat, p.lat...)
	}
	slices.Sort(out.lat)
	return out
}

// runSockets runs f once per socket and collects the results.
func runSockets(n int, f func(i int) (loadResult, error)) ([]loadResult, error) {
	parts := make([]loadResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { parts[i], errs[i] = f(i) })
	}
	wg.Wait()
	return parts, errors.Join(errs...)
}

// closedLoop measures the peak rate: workers sockets, each sending its next
// query as soon as the last one is answered, for dur after dnsWarmup.
func closedLoop(ctx context.Context, target netip.AddrPort, workers int, dur time.Duration, gen func(int) *queryGen) (loadResult, error) {
	start := time.Now()
	from, until := start.Add(dnsWarmup), start.Add(dnsWarmup+dur)
	cpu := make(chan time.Duration, 1)
	go func() {
		time.Sleep(time.Until(from))
		c := processCPU()
		time.Sleep(time.Until(until))
		cpu <- processCPU() - c
	}()
	parts, err := runSockets(workers, func(i int) (loadResult, error) {
		return closedWorker(ctx, target, from, until, gen(i))
	})
	if err != nil {
		return loadResult{}, err
	}
	l := merge(parts, dur)
	l.cpu = <-cpu
	return l, ctx.Err()
}

// socketBuffer is the receive buffer of the generator's and the stub's
// sockets (the kernel caps it at net.core.rmem_max): what is measured is
// the resolver, whose sockets keep sluice's own settings.
const socketBuffer = 4 << 20

// dialClient opens a load generator's socket to target. Its buffer is
// large so that a reader that waits for its turn loses nothing: a lost
// reply would be the generator's, not the path's.
func dialClient(target netip.AddrPort) (*net.UDPConn, error) {
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(target))
	if err != nil {
		return nil, fmt.Errorf("client socket: %w", err)
	}
	if err := conn.SetReadBuffer(socketBuffer); err != nil {
		conn.Close()
		return nil, fmt.Errorf("client socket: %w", err)
	}
	return conn, nil
}

// setThreadsNice gives every thread of this process the nice value n. On
// Linux a nice value belongs to a thread, and a new thread inherits its
// creator's, so setting all that exist covers the Go runtime's later ones.
func setThreadsNice(n int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("list threads: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread may have exited since the listing.
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("nice %d for thread %d: %w", n, tid, err)
		}
	}
	return nil
}

// processCPU is the CPU time this process used so far, user and system.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func closedWorker(ctx context.Context, target netip.AddrPort, from, until time.Time, g *queryGen) (loadResult, error) {
	conn, err := dialClient(target)
	if err != nil {
		return loadResult{}, err
	}
	defer conn.Close()
	r := loadResult{lat: make([]time.Duration, 0, 1<<15)}
	buf := make([]byte, 1500)
	id := uint16(rand.Uint32())
	var deadline time.Time
	for {
		sent := time.Now()
		if !sent.Before(until) || ctx.Err() != nil {
			return r, nil
		}
		// A deadline per query would cost a timer update each; one moved
		// every 100 ms still gives every query at least 0.9 s.
		if deadline.Sub(sent) < dnsQueryTimeout*9/10 {
			deadline = sent.Add(dnsQueryTimeout)
			if err := conn.SetReadDeadline(deadline); err != nil {
				return r, fmt.Errorf("client socket: %w", err)
			}
		}
		id++
		if _, err := conn.Write(g.query(id)); err != nil {
			return r, fmt.Errorf("send to %s: %w", target, err)
		}
		st, err := awaitReply(conn, buf, id)
		if err != nil {
			return r, fmt.Errorf("receive from %s: %w", target, err)
		}
		if sent.Before(from) {
			continue
		}
		r.sent++
		switch st {
		case replyGood:
			r.good++
			r.lat = append(r.lat, time.Since(sent))
		case replyFailed:
			r.failed++
		default:
			r.lost++
			deadline = time.Time{} // expired
		}
	}
}

// awaitReply reads until the reply to id arrives (replyGood or
// replyFailed) or the read deadline passes (replyOther), skipping late
// replies to earlier queries.
func awaitReply(conn *net.UDPConn, buf []byte, id uint16) (replyStatus, error) {
	for {
		n, err := conn.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return replyOther, nil
		}
		if err != nil {
			return replyOther, err
		}
		if st := checkReply(buf[:n], id); st != replyOther {
			return st, nil
		}
	}
}

// pacerTick is the open loop's pacing interval: every query due goes out
// at each tick, so the arrivals come in small bursts (at 50k qps, five
// queries every 100 µs) rather than in the millisecond bursts the Go
// timer would give.
const pacerTick = 100 * time.Microsecond

// openLoop measures latency at a given rate: one pacer sends at rate,
// spread over sockets in turn, on a fixed schedule whatever the replies
// do, so that a slow reply delays no later query and queueing shows in
// the latency; a reader per socket takes the replies.
func openLoop(ctx context.Context, target netip.AddrPort, sockets int, rate float64, dur time.Duration, gen func(int) *queryGen) (loadResult, error) {
	socks := make([]*openSock, 0, sockets)
	defer func() {
		for _, s := range socks {
			s.conn.Close()
		}
	}()
	for i := range sockets {
		conn, err := dialClient(target)
		if err != nil {
			return loadResult{}, err
		}
		s := &openSock{conn: conn, g: gen(i), sentAt: make([]atomic.Int64, 1<<16), done: make(chan error, 1),
			rx: loadResult{lat: make([]time.Duration, 0, int(rate*dur.Seconds())/sockets+16)}}
		socks = append(socks, s)
	}
	start := time.Now()
	from, until := dnsWarmup, dnsWarmup+dur // since start
	for _, s := range socks {
		go s.read(start, from)
	}
	paced := make(chan error, 1)
	go func() { paced <- pace(ctx, socks, rate, start, from, until) }()
	err := <-paced

	// Give the replies in flight their time, then stop the readers.
	for wait := time.Now().Add(dnsQueryTimeout); time.Now().Before(wait); time.Sleep(5 * time.Millisecond) {
		inFlight := false
		for _, s := range socks {
			inFlight = inFlight || s.answered.Load() < s.sent
		}
		if !inFlight {
			break
		}
	}
	parts := make([]loadResult, len(socks))
	for i, s := range socks {
		s.conn.Close()
		if rerr := <-s.done; rerr != nil && err == nil {
			err = fmt.Errorf("receive from %s: %w", target, rerr)
		}
		rx := s.rx
		rx.sent = s.measured
		rx.lost = rx.sent - rx.good - rx.failed
		// A query lost or failed took at least that long as far as its
		// client is concerned, which would retry: leaving it out would
		// make an overloaded path look fast.
		for range rx.lost + rx.failed {
			rx.lat = append(rx.lat, dnsQueryTimeout)
		}
		parts[i] = rx
	}
	if err != nil {
		return loadResult{}, err
	}
	return merge(parts, dur), ctx.Err()
}

// openSock is one open-loop socket.
type openSock struct {
	conn *net.UDPConn
	g    *queryGen
	// sentAt[id] is when the query with that ID was sent, in ns since the
	// start plus one (0: none in flight). IDs count up, so one is reused
	// only after 65,536 queries on the socket: seconds at these rates,
	// well past dnsQueryTimeout.
	sentAt   []atomic.Int64
	answered atomic.Int64
	sent     int64 // by the pacer; read once it is done
	measured int   // the same, of those sent in the measured window
	rx       loadResult
	done     chan error
}

// pace sends queries at rate, in turn over socks, from start until the
// time until since it. It keeps its goroutine on one OS thread, with a fine
// timer slack, and sleeps in nanosleep: the Go timer would wake it a
// millisecond late. The thread ends with the goroutine, so the slack
// changes no other goroutine's timers.
func pace(ctx context.Context, socks []*openSock, rate float64, start time.Time, from, until time.Duration) error {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(time.Microsecond), 0, 0, 0)
	interval := time.Duration(float64(time.Second) / rate)
	var n int64
	for {
		now := time.Since(start)
		if now >= until || ctx.Err() != nil {
			return nil
		}
		for due := int64(now/interval) + 1; n < due; n++ {
			s := socks[n%int64(len(socks))]
			id := uint16(s.sent)
			q := s.g.query(id)
			t := time.Since(start)
			s.sentAt[id].Store(int64(t) + 1)
			if _, err := s.conn.Write(q); err != nil {
				return fmt.Errorf("send to %s: %w", s.conn.RemoteAddr(), err)
			}
			s.sent++
			if t >= from {
				s.measured++
			}
		}
		ts := unix.NsecToTimespec(int64(max(time.Duration(n)*interval-time.Since(start), pacerTick)))
		_ = unix.Nanosleep(&ts, nil)
	}
}

// read takes replies until the socket is closed.
func (s *openSock) read(start time.Time, from time.Duration) {
	buf := make([]byte, 1500)
	for {
		n, err := s.conn.Read(buf)
		now := time.Since(start)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				err = nil
			}
			s.done <- err
			return
		}
		if n < 2 {
			continue
		}
		id := uint16(buf[0])<<8 | uint16(buf[1])
		t := s.sentAt[id].Swap(0)
		if t == 0 {
			continue // a duplicate, or a reply to a query given up on
		}
		s.answered.Add(1)
		sent := time.Duration(t - 1)
		lat := now - sent
		if sent < from || lat > dnsQueryTimeout {
			continue // not measured, or lost: its client gave up
		}
		switch checkReply(buf[:n], id) {
		case replyGood:
			s.rx.good++
			s.rx.lat = append(s.rx.lat, lat)
		default:
			s.rx.failed++
		}
	}
}
