// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/allowlist"
)

// Defaults of Config, documented in the package comment.
const (
	DefaultMinTTL        = 5 * time.Second
	DefaultMaxTTL        = time.Hour
	DefaultGrace         = 10 * time.Second
	DefaultMaxIPsPerName = 64
	DefaultTimeout       = 2 * time.Second
	DefaultCacheSize     = 10000
	// upstreamUDPSize is the EDNS0 buffer size sluice advertises upstream
	// (the DNS flag day 2020 value: no IP fragmentation).
	upstreamUDPSize = 1232
)

// ErrMapFull is what a Learner returns (wrapped) when the datapath has no
// room for another learned address.
var ErrMapFull = errors.New("learned-IP map full")

// Config configures a Resolver.
type Config struct {
	Policy    *allowlist.Policy
	Upstreams []string // host:port
	Learner   Learner  // nil: learn nothing (resolver-only use)
	// Clock is the datapath's clock (CLOCK_BOOTTIME on Linux); expiries
	// given to the Learner are on it.
	Clock  func() time.Duration
	Audit  bool // forward and learn everything, report what would be refused
	MinTTL time.Duration
	MaxTTL time.Duration
	// Grace keeps a learned address reachable this long past its TTL.
	// Zero means none (the command line's default is DefaultGrace); an
	// address's expiry is extended by answers only when it would grow by
	// more than Grace/2, so with none every answer updates the map.
	Grace         time.Duration
	MaxIPsPerName int
	Timeout       time.Duration // per upstream attempt
	CacheSize     int
	OnEvent       func(Event) // called synchronously; keep it short
	// ObserveUpstream receives the duration of each upstream exchange
	// (for the latency histogram).
	ObserveUpstream func(time.Duration)
	// OnQuery receives each answered query's verdict: "forwarded",
	// "cached", "local", "refused", "servfail" or "other".
	OnQuery func(verdict string)
	// Ask, if set, is asked about a name the policy does not allow
	// (ask mode): it returns true to answer it as if it were allowed. It
	// may block; its context ends after AskHold. A name it allows for
	// the rest of the session is added with AllowName, not here.
	Ask func(context.Context, AskQuery) bool
	// AskHold bounds a held answer (DefaultAskHold when zero).
	AskHold time.Duration
}

// EventKind says what a resolver event is about.
type EventKind int

// The resolver's events.
const (
	EventRefused        EventKind = iota + 1 // name not allowed: REFUSED, not forwarded
	EventRebinding                           // an address was removed from an answer
	EventCapReached                          // per-name cap: SERVFAIL
	EventMapFull                             // datapath map full: SERVFAIL
	EventUpstreamFailed                      // no upstream answered: SERVFAIL
)

// ReasonNotAllowed is the Reason of an EventRefused for a name the policy
// does not allow (its other refusals: invalid names, other classes, PTR).
const ReasonNotAllowed = "not in the allowlist"

// ReasonSegmented is the Reason of an EventRefused without a name: the
// kernel DNS path dropped a send that carried several datagrams at once
// (UDP GSO), whose queries no judge can tell apart as the upstream would.
const ReasonSegmented = "several datagrams in one send (UDP GSO) cannot be judged one by one: dropped"

// Event is something the user should hear about.
type Event struct {
	Kind   EventKind
	Audit  bool // would have happened without --audit
	Name   string
	QType  string
	Addr   netip.Addr     // EventRebinding: the dropped address
	Client netip.AddrPort // who asked (a loopback socket of the session)
	Reason string
}

// String is the line a user reads.
func (e Event) String() string {
	prefix := "refused"
	if e.Audit {
		prefix = "audit: would refuse"
	}
	switch e.Kind {
	case EventRefused:
		if e.Name == "" {
			return fmt.Sprintf("%s DNS send to the upstream: %s", prefix, e.Reason)
		}
		return fmt.Sprintf("%s DNS query for %s (%s): %s", prefix, e.Name, e.QType, e.Reason)
	case EventRebinding:
		if e.Audit {
			prefix = "audit: would drop"
		} else {
			prefix = "dropped"
		}
		return fmt.Sprintf("%s %s from the answer for %s: %s address (DNS rebinding); add allow_private to the entry if this is intended", prefix, e.Addr, e.Name, e.Reason)
	case EventCapReached, EventMapFull, EventUpstreamFailed:
		return fmt.Sprintf("SERVFAIL for %s (%s): %s", e.Name, e.QType, e.Reason)
	}
	return fmt.Sprintf("DNS event %d for %s: %s", e.Kind, e.Name, e.Reason)
}

// Resolver is one session's resolver.
type Resolver struct {
	cfg     Config
	policy  atomic.Pointer[allowlist.Policy]
	extras  atomic.Pointer[askExtras]
	ups     []*upstream
	cache   *cache
	learned *learnedSet
	stats   Stats

	mu      sync.Mutex
	servers []*dns.Server
	udp     []*udpListener
	port4   uint16
	port6   uint16
	stopGC  chan struct{}
	gcDone  chan struct{}
	swDone  chan struct{}
}

// New checks cfg and returns a resolver that is not listening yet.
func New(cfg Config) (*Resolver, error) {
	if cfg.Clock == nil {
		start := time.Now()
		cfg.Clock = func() time.Duration { return time.Since(start) }
	}
	if cfg.MinTTL <= 0 {
		cfg.MinTTL = DefaultMinTTL
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = DefaultMaxTTL
	}
	if cfg.MaxTTL < cfg.MinTTL {
		return nil, fmt.Errorf("DNS TTL bounds: max %v is below min %v", cfg.MaxTTL, cfg.MinTTL)
	}
	if cfg.Grace < 0 {
		return nil, fmt.Errorf("DNS grace %v is negative", cfg.Grace)
	}
	if cfg.MaxIPsPerName <= 0 {
		cfg.MaxIPsPerName = DefaultMaxIPsPerName
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.AskHold <= 0 {
		cfg.AskHold = DefaultAskHold
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	r := &Resolver{cfg: cfg, cache: newCache(cfg.CacheSize), learned: newLearnedSet()}
	for _, u := range cfg.Upstreams {
		addr, err := UpstreamAddr(u)
		if err != nil {
			return nil, err
		}
		r.ups = append(r.ups, newUpstream(addr, cfg.Timeout))
	}
	r.policy.Store(cfg.Policy)
	return r, nil
}

// UpstreamAddr normalises ADDR[:PORT] (IPv6 in brackets when a port is
// given) to host:port, port 53 by default. Only IP addresses: resolving the
// resolver's own name would need a resolver.
func UpstreamAddr(s string) (string, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return "", fmt.Errorf("DNS upstream %q: port 0 is not a DNS server's port", s)
		}
		return ap.String(), nil
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return netip.AddrPortFrom(a, 53).String(), nil
	}
	return "", fmt.Errorf("DNS upstream %q: want an IP address with an optional :port (IPv6 as [addr]:port)", s)
}

// SetPolicy swaps the policy; queries in flight finish under the old one.
func (r *Resolver) SetPolicy(p *allowlist.Policy) { r.policy.Store(p) }

// ListenLoopback serves UDP and TCP on 127.0.0.1 and ::1, each family on
// one kernel-chosen port shared by UDP and TCP (the datapath redirects both
// protocols to one port), and starts the garbage collector.
func (r *Resolver) ListenLoopback() error { return r.ListenLoopbackOn(0, 0) }

// ListenLoopbackOn is ListenLoopback preferring the given ports (0: any):
// a restarted daemon takes back the ports its sessions' DNS traffic is
// redirected to. A preferred port that is taken falls back to a new one.
func (r *Resolver) ListenLoopbackOn(port4, port6 uint16) error {
	p4, err := r.listenPair("127.0.0.1", port4)
	if err != nil {
		return err
	}
	// Without IPv6 loopback (IPv6 disabled, or lo down in a fresh
	// namespace) the datapath sends IPv6 DNS to ::ffff:127.0.0.1 instead.
	p6, err := r.listenPair("::1", port6)
	if err != nil {
		p6 = 0
	}
	stop, done, swDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	r.mu.Lock()
	r.port4, r.port6 = p4, p6
	r.stopGC, r.gcDone, r.swDone = stop, done, swDone
	r.mu.Unlock()
	go r.gcLoop(stop, done)
	go r.sweepLoop(stop, swDone)
	return nil
}

func (r *Resolver) listenPair(ip string, prefer uint16) (uint16, error) {
	var lastErr error
	for i := range 20 {
		want := "0"
		if i == 0 && prefer != 0 {
			want = fmt.Sprint(prefer)
		}
		pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, want))
		if err != nil && want != "0" {
			lastErr = err
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("resolver: listen UDP on %s: %w", ip, err)
		}
		port := uint16(pc.LocalAddr().(*net.UDPAddr).Port)
		l, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
		if err != nil {
			pc.Close()
			lastErr = err
			continue
		}
		uc := pc.(*net.UDPConn)
		growReadBuffer(uc)
		ul := &udpListener{r: r, conn: uc, batch: newBatchConn(uc), generalSlots: make(chan struct{}, maxGeneral)}
		if err := ul.openProbe(); err != nil {
			pc.Close()
			l.Close()
			return 0, err
		}
		r.mu.Lock()
		r.udp = append(r.udp, ul)
		r.mu.Unlock()
		go ul.serveUDP()
		r.serve(&dns.Server{Listener: l, Handler: r})
		return port, nil
	}
	return 0, fmt.Errorf("resolver: no port free for both UDP and TCP on %s: %w", ip, lastErr)
}

func (r *Resolver) serve(s *dns.Server) {
	started := make(chan struct{})
	s.NotifyStartedFunc = func() { close(started) }
	r.mu.Lock()
	r.servers = append(r.servers, s)
	r.mu.Unlock()
	go func() { _ = s.ActivateAndServe() }()
	<-started
}

// Ports are the loopback ports on 127.0.0.1 and ::1 (0: no IPv6 loopback).
func (r *Resolver) Ports() (v4, v6 uint16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.port4, r.port6
}

// LearnedCount is the number of addresses the session has learned.
func (r *Resolver) LearnedCount() int { return r.learned.size() }

// Close stops serving and the garbage collector. Learned addresses stay
// in the datapath until the session is removed.
func (r *Resolver) Close() {
	r.mu.Lock()
	servers, udp := r.servers, r.udp
	r.servers, r.udp = nil, nil
	stop, done, swDone := r.stopGC, r.gcDone, r.swDone
	r.stopGC = nil
	r.mu.Unlock()
	for _, s := range servers {
		_ = s.Shutdown()
	}
	for _, l := range udp {
		l.conn.Close()
		if l.probe != nil {
			l.probe.Close()
		}
	}
	if stop != nil {
		close(stop)
		<-done
		<-swDone
	}
	for _, u := range r.ups {
		u.close()
	}
}

// gcLoop gets its channels as arguments: Close clears r.stopGC, and a loop
// that read the field again would wait on a nil channel for ever.
func (r *Resolver) gcLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			_, _ = r.GC()
		}
	}
}

// GC forgets expired learned addresses now (the kernel already refuses
// them; this only frees map space).
func (r *Resolver) GC() (int, error) {
	now := r.cfg.Clock()
	r.cache.sweep(now)
	return r.learned.gc(r.cfg.Learner, now)
}

// Report passes an event of the session's DNS that the resolver did not
// raise itself (the kernel DNS path's drops) to the same sink as its own.
func (r *Resolver) Report(e Event) { r.event(e) }

func (r *Resolver) event(e Event) {
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(e)
	}
}

// ServeDNS answers one query (the TCP server's handler; UDP has its own
// loop, udpserve.go).
func (r *Resolver) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	var client netip.AddrPort
	switch a := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		client = a.AddrPort()
	case *net.TCPAddr:
		client = a.AddrPort()
	}
	resp := r.Resolve(context.Background(), req, client)
	if _, tcp := w.RemoteAddr().(*net.TCPAddr); tcp {
		resp.Compress = true // no size limit to meet, but 64 KiB is the most
	} else {
		fitUDP(req, resp)
	}
	_ = w.WriteMsg(resp)
}
