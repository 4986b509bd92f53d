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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

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
	// dnsBudget bounds the DNS part: rounds stop early rather than overrun.
	dnsBudget = 60 * time.Second
	// dnsWarmup is the unmeasured start of every arm, while sockets,
	// goroutines and the CPU frequency settle.
	dnsWarmup = 250 * time.Millisecond
	// dnsQueryTimeout is when a query counts as lost. Loopback loses
	// nothing unless a socket buffer overflows, so any loss is reported.
	dnsQueryTimeout = time.Second
	// dnsRepeatedNames is the size of the repeated-names set.
	dnsRepeatedNames = 100
	// dnsStubTTL is the TTL of the stub's answers: long enough that no
	// cached answer expires during the benchmark.
	dnsStubTTL = 300
	// dnsMaxBad is the fraction of lost or failed queries in an arm above
	// which its figures mean nothing and the benchmark fails.
	dnsMaxBad = 0.01
)

// dnsOptions are the DNS benchmark's flags.
type dnsOptions struct {
	rounds     int
	dur        time.Duration // measured time per arm
	workers    int           // closed loop: sockets, one query in flight each
	senders    int           // open loop: sockets, each at rate/senders
	cpuprofile string
}

// dnsResult is what the DNS benchmark measured; in every series A is
// straight to the stub and B through sluice's resolver.
type dnsResult struct {
	opts        dnsOptions
	rounds      int
	unique      series // qps, closed loop
	repeated    series // qps, closed loop
	p50, p99    series // ns, open loop at half the direct unique-names peak
	rates       []float64
	achieved    series // qps actually sent in the open-loop arms
	lost        [2]int // A, B: queries without a reply within dnsQueryTimeout
	failed      [2]int // A, B: replies that were not a NOERROR answer
	sent        [2]int
	learns      uint64
	forwarded   uint64 // through sluice, unique names
	cached      uint64 // answered from sluice's cache, repeated names
	missedCache uint64 // repeated names forwarded after all
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
	res, err := dnsresolver.New(dnsresolver.Config{Policy: policy, Upstreams: []string{stub.addr.String()}, Learner: learner})
	if err != nil {
		return nil, fmt.Errorf("resolver: %w", err)
	}
	if err := res.ListenLoopback(); err != nil {
		return nil, fmt.Errorf("resolver: %w", err)
	}
	defer res.Close()
	port4, _ := res.Ports()
	viaSluice := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port4)

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
	d := &dnsResult{opts: o}
	var peaks []float64
	tally := func(arm int, l loadResult) {
		d.sent[arm] += l.sent
		d.lost[arm] += l.lost
		d.failed[arm] += l.failed
	}
	// both runs one case's direct arm A and sluice arm B in the round's
	// order and vets them.
	both := func(r int, c dnsCase) (loadResult, loadResult, error) {
		direct := func() (loadResult, error) {
			fmt.Fprintf(os.Stderr, "bench: DNS round %d/%d, %s, direct: ", r+1, o.rounds, c.what)
			l, err := c.run(stub.addr)
			progress(l, err)
			return l, err
		}
		via := func() (loadResult, error) {
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
			tally(i, l)
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
		peaks = append(peaks, a.qps())

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

		rate := median(peaks) / 2
		d.rates = append(d.rates, rate)
		a, b, err = both(r, dnsCase{
			what: fmt.Sprintf("latency at %s", fmtQPS(rate)),
			open: true,
			run: func(to netip.AddrPort) (loadResult, error) {
				return openLoop(ctx, to, o.senders, rate, o.dur, unique)
			},
		})
		if err != nil {
			return err
		}
		d.p50.add(float64(percentile(a.lat, 50)), float64(percentile(b.lat, 50)))
		d.p99.add(float64(percentile(a.lat, 99)), float64(percentile(b.lat, 99)))
		d.achieved.add(a.sentQPS(), b.sentQPS())
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
		addedRow(fmt.Sprintf("DNS p99 latency at %s (half the direct peak), unique names", fmtQPS(median(d.rates))), &d.p99, dnsMaxAddedP99),
		addedInfoRow("DNS p50 latency, the same", &d.p50),
	}
}

// missed reports whether a DNS target was missed.
func (d *dnsResult) missed() bool {
	return median(d.unique.ratios()) < dnsMinUniqueRatio ||
		median(d.repeated.ratios()) < dnsMinCachedRatio ||
		median(d.p99.added()) >= float64(dnsMaxAddedP99)
}

// describe says how the DNS rows were measured.
func (d *dnsResult) describe(w io.Writer) {
	o := d.opts
	rounds := fmt.Sprintf("%d rounds", d.rounds)
	if d.rounds < o.rounds {
		rounds = fmt.Sprintf("%d rounds (of %d asked: the machine was too slow for the DNS part's %s budget)", d.rounds, o.rounds, dnsBudget)
	}
	fmt.Fprintf(w, "DNS rows: A asks a stub upstream directly (miekg/dns on 127.0.0.1 UDP, answering any *.%s name with one A record in 203.0.113.0/24, TTL %d s, no delay); "+
		"B asks an in-process sluice resolver (dnsresolver, policy `*.%s`, default settings) that forwards to the same stub. "+
		"%s, arms alternating (A B, then B A); medians of the rounds. "+
		"Queries per second: closed loop, %d workers, each its own UDP socket with one query in flight, %s per arm after %s of warm-up. "+
		"Latency: open loop, %d sockets each sending on a fixed schedule at a share of the rate, from the write to the reply's arrival, %s per arm (the rate actually sent: A %s, B %s). "+
		"Queries are A, class IN, recursion desired, without EDNS0; unique names are `<16 random hex digits>.%s`, repeated names are warmed through sluice before each round's B arm. "+
		"Load generator, resolver and stub are one process sharing the machine's %d CPUs (GOMAXPROCS %d), as a confined program, the daemon and a local upstream would.\n\n",
		dnsZone, dnsStubTTL, dnsZone,
		rounds,
		o.workers, o.dur, dnsWarmup,
		o.senders, o.dur, fmtQPS(median(d.achieved.a)), fmtQPS(median(d.achieved.b)),
		dnsZone,
		runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "The resolver learns through an in-memory fake learner (%d addresses learned, each a no-op that counts): the kernel map update is not included here, it is the datapath's cost and measured with it. "+
		"Through sluice, %d unique-name queries were forwarded, and %d repeated-name queries answered from the cache and %d forwarded (evicted from the full cache by the unique names). "+
		"Lost (no reply within %s) / failed: A %d / %d, B %d / %d of %d and %d queries.\n",
		d.learns, d.forwarded, d.cached, d.missedCache, dnsQueryTimeout, d.lost[0], d.failed[0], d.lost[1], d.failed[1], d.sent[0], d.sent[1])
}

// stubUpstream is the upstream both arms end at. It answers from pooled
// messages and buffers so that the direct arm measures the path, not the
// stub's garbage.
type stubUpstream struct {
	srv  *dns.Server
	addr netip.AddrPort
	pool sync.Pool // of *stubReply
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
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
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

// inZone reports whether the fully qualified name is under dnsZone.
func inZone(name string) bool {
	const suffix = "." + dnsZone + "."
	return len(name) > len(suffix) && strings.EqualFold(name[len(name)-len(suffix):], suffix)
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
	lat                      []time.Duration // of the good replies (open loop: also the rest, as dnsQueryTimeout); sorted once merged
}

func (l loadResult) qps() float64     { return float64(l.good) / l.window.Seconds() }
func (l loadResult) sentQPS() float64 { return float64(l.sent) / l.window.Seconds() }

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
	parts, err := runSockets(workers, func(i int) (loadResult, error) {
		return closedWorker(ctx, target, from, until, gen(i))
	})
	if err != nil {
		return loadResult{}, err
	}
	return merge(parts, dur), ctx.Err()
}

func closedWorker(ctx context.Context, target netip.AddrPort, from, until time.Time, g *queryGen) (loadResult, error) {
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(target))
	if err != nil {
		return loadResult{}, fmt.Errorf("client socket: %w", err)
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

// openLoop measures latency at a given rate: senders sockets, each sending
// at rate/senders on a fixed schedule whatever the replies do, so that a
// slow reply delays no later query and queueing shows in the latency.
func openLoop(ctx context.Context, target netip.AddrPort, senders int, rate float64, dur time.Duration, gen func(int) *queryGen) (loadResult, error) {
	start := time.Now()
	parts, err := runSockets(senders, func(i int) (loadResult, error) {
		return openSender(ctx, target, rate/float64(senders), start, dur, gen(i))
	})
	if err != nil {
		return loadResult{}, err
	}
	return merge(parts, dur), ctx.Err()
}

func openSender(ctx context.Context, target netip.AddrPort, rate float64, start time.Time, dur time.Duration, g *queryGen) (loadResult, error) {
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(target))
	if err != nil {
		return loadResult{}, fmt.Errorf("client socket: %w", err)
	}
	defer conn.Close()
	from, until := dnsWarmup, dnsWarmup+dur // since start

	// sentAt[id] is when the query with that ID was sent, in ns since
	// start plus one (0: none in flight). IDs are sequential, so one is
	// reused only after 65,536 queries: seconds at these rates, well past
	// dnsQueryTimeout.
	sentAt := make([]atomic.Int64, 1<<16)
	var answered atomic.Int64
	rx := loadResult{lat: make([]time.Duration, 0, int(rate*dur.Seconds())+16)}
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, err := conn.Read(buf)
			now := time.Since(start)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					err = nil
				}
				done <- err
				return
			}
			if n < 2 {
				continue
			}
			id := uint16(buf[0])<<8 | uint16(buf[1])
			t := sentAt[id].Swap(0)
			if t == 0 {
				continue // a duplicate, or a reply to a query given up on
			}
			answered.Add(1)
			lat := now - time.Duration(t-1)
			if time.Duration(t-1) < from || lat > dnsQueryTimeout {
				continue // not measured, or lost: its client gave up
			}
			switch checkReply(buf[:n], id) {
			case replyGood:
				rx.good++
				rx.lat = append(rx.lat, lat)
			default:
				rx.failed++
			}
		}
	}()

	interval := time.Duration(float64(time.Second) / rate)
	var n, measured int64
	var sendErr error
send:
	for {
		now := time.Since(start)
		if now >= until || ctx.Err() != nil {
			break
		}
		// Everything due by now goes out at once: a sleep shorter than
		// the timer's resolution would otherwise make the rate drift.
		for due := int64(now/interval) + 1; n < due; n++ {
			q := g.query(uint16(n))
			t := time.Since(start)
			sentAt[uint16(n)].Store(int64(t) + 1)
			if _, err := conn.Write(q); err != nil {
				sendErr = fmt.Errorf("send to %s: %w", target, err)
				break send
			}
			if t >= from {
				measured++
			}
		}
		time.Sleep(time.Duration(n)*interval - time.Since(start))
	}
	// Give the replies in flight their time, then stop the reader.
	for wait := time.Now().Add(dnsQueryTimeout); answered.Load() < n && time.Now().Before(wait); {
		time.Sleep(5 * time.Millisecond)
	}
	conn.Close()
	if err := <-done; err != nil && sendErr == nil {
		sendErr = fmt.Errorf("receive from %s: %w", target, err)
	}
	rx.sent = int(measured)
	rx.lost = rx.sent - rx.good - rx.failed
	// A query lost or failed took at least that long as far as its client
	// is concerned, which would retry: leaving it out would make an
	// overloaded path look fast.
	for range rx.lost + rx.failed {
		rx.lat = append(rx.lat, dnsQueryTimeout)
	}
	return rx, sendErr
}
