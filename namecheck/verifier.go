// SPDX-License-Identifier: Apache-2.0

package namecheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
)

// FlightTimeout bounds the wait for a connection's first bytes. A client
// that waits for the server to speak first (SMTP, MySQL) on a checked
// port is refused when it runs out: such protocols name no host anyway.
const FlightTimeout = 10 * time.Second

// Origin is where a connection handed to the verifier meant to go, and
// who made it (the datapath's record, bpf/verify.h).
type Origin struct {
	Dst  netip.AddrPort
	PID  uint32
	Comm string
}

// Config configures a session's verifier.
type Config struct {
	// Policy is the session's current policy.
	Policy func() *allowlist.Policy
	// Origin returns and forgets the original destination of the
	// connection accepted from peer; ok false: the datapath sent none.
	Origin func(peer netip.AddrPort) (Origin, bool)
	// LearnedFrom names the names an address was learned for (may be nil).
	LearnedFrom func(netip.Addr) []string
	// OnRefuse receives every refusal (and, in audit mode, every
	// connection that would have been refused).
	OnRefuse func(Refusal)
	// Audit lets refused connections through, reporting them.
	Audit bool
	// Dial reaches the original destination; nil: a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// FlightTimeout overrides FlightTimeout (tests).
	FlightTimeout time.Duration
	// Splice, when set, carries an allowed connection (its first flight
	// still queued, or already written upstream where it could not be
	// peeked at) until both directions end, and closes both; false: it
	// could not (nothing was read from either connection), and the
	// verifier copies through user space.
	Splice func(client, upstream *net.TCPConn) bool
}

// Refusal is a connection refused because of the name it carried.
type Refusal struct {
	PID        uint32
	Comm       string
	Dst        netip.AddrPort
	Flight     Flight
	LearnedFor []string
	// Reason says why, without the destination.
	Reason string
	Audit  bool
}

// String is the line a user reads, after "sluice: ": "refused
// curl[4242] -> 104.16.1.2:443 (TLS SNI attacker.example): the address was
// allowed for registry.npmjs.org".
func (r Refusal) String() string {
	verb := "refused"
	if r.Audit {
		verb = "audit: would refuse"
	}
	what := string(r.Flight.Proto)
	if r.Flight.Name != "" {
		what += " " + r.Flight.Name
	}
	return fmt.Sprintf("%s %s[%d] -> %s (%s): %s", verb, r.Comm, r.PID, r.Dst, what, r.Reason)
}

// Stats are a verifier's counters.
type Stats struct {
	Checked atomic.Uint64 // connections judged (their first flight came, or its time ran out)
	Refused atomic.Uint64 // refused (or, in audit mode, would have been)
	Failed  atomic.Uint64 // allowed, but the original address could not be reached
}

// Verifier judges the connections the datapath sends it.
type Verifier struct {
	cfg   Config
	stats Stats
	mu    sync.Mutex
	ls    []net.Listener
	done  bool
	conns sync.WaitGroup
}

// New returns a verifier; Serve it on the listeners the datapath sends
// the session's checked connections to.
func New(cfg Config) *Verifier {
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second}
		cfg.Dial = d.DialContext
	}
	if cfg.FlightTimeout == 0 {
		cfg.FlightTimeout = FlightTimeout
	}
	return &Verifier{cfg: cfg}
}

// Stats returns the verifier's counters.
func (v *Verifier) Stats() *Stats { return &v.stats }

// Serve accepts connections on l until Close (or l fails).
func (v *Verifier) Serve(l net.Listener) error {
	v.mu.Lock()
	if v.done {
		v.mu.Unlock()
		l.Close()
		return net.ErrClosed
	}
	v.ls = append(v.ls, l)
	v.mu.Unlock()
	for {
		c, err := l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		tc, ok := c.(*net.TCPConn)
		if !ok {
			c.Close()
			continue
		}
		v.conns.Go(func() { v.handle(tc) })
	}
}

// Close stops accepting; connections already spliced go on until they end.
func (v *Verifier) Close() {
	v.mu.Lock()
	v.done = true
	ls := v.ls
	v.ls = nil
	v.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
}

// Reset closes c, with a TCP reset (SO_LINGER 0) when it is a TCP
// connection, so that the peer fails at once instead of reading an
// orderly end of stream. The verifier and the proxy refuse with it.
func Reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

func (v *Verifier) handle(c *net.TCPConn) {
	peer, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		Reset(c)
		return
	}
	o, ok := v.cfg.Origin(peer)
	if !ok {
		// Not sent by the datapath: a process of the session dialled the
		// verifier's port itself. Nothing to splice to.
		Reset(c)
		return
	}
	// On 80 and 443 the original address is dialled while the first
	// flight comes: the TCP handshake is the one the program asked for,
	// to an address its policy allows, and not one byte goes upstream
	// before the verdict; a refused connection's upstream is reset
	// unused. Other ports (an entry with "verify": "name") may carry a
	// protocol whose server speaks first, or logs every contact: they are
	// dialled after the verdict.
	var up pendingDial
	if early := o.Dst.Port() == 80 || o.Dst.Port() == 443; early {
		up = v.dialAsync(o.Dst)
	}
	_ = c.SetReadDeadline(time.Now().Add(v.cfg.FlightTimeout))
	// Peeked, the first flight stays queued and goes upstream with the
	// rest, in the kernel or by the copy.
	peeked := true
	buf, f, err := PeekFlight(c)
	if errors.Is(err, errors.ErrUnsupported) {
		peeked = false
		buf, f, err = ReadFlight(c, Inspect)
	}
	if err != nil {
		if errors.Is(err, ErrIncomplete) {
			f.Problem = NoFlightWithin(v.cfg.FlightTimeout)
		} else if f.Problem == "" {
			// The client went away before a judgement: nothing to report.
			up.discard()
			Reset(c)
			return
		}
	}
	v.stats.Checked.Add(1)
	if why := Judge(v.cfg.Policy(), f); why != "" {
		r := Refusal{PID: o.PID, Comm: o.Comm, Dst: o.Dst, Flight: f, Audit: v.cfg.Audit}
		if v.cfg.LearnedFrom != nil {
			r.LearnedFor = v.cfg.LearnedFrom(o.Dst.Addr())
		}
		r.Reason = Explain(why, f.Name, r.LearnedFor)
		v.stats.Refused.Add(1)
		if v.cfg.OnRefuse != nil {
			v.cfg.OnRefuse(r)
		}
		if !v.cfg.Audit || err != nil {
			up.discard()
			Reset(c)
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	if up == nil {
		up = v.dialAsync(o.Dst)
	}
	if peeked {
		buf = nil
	}
	v.splice(c, up, buf)
}

// pendingDial is a dial of the original address under way.
type pendingDial chan dialResult

type dialResult struct {
	c   net.Conn
	err error
}

func (v *Verifier) dialAsync(dst netip.AddrPort) pendingDial {
	p := make(pendingDial, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := v.cfg.Dial(ctx, "tcp", dst.String())
		cancel()
		p <- dialResult{c, err}
	}()
	return p
}

// wait returns the dialled connection.
func (p pendingDial) wait() (net.Conn, error) {
	r := <-p
	return r.c, r.err
}

// discard resets the connection once the dial is done, without waiting.
func (p pendingDial) discard() {
	if p == nil {
		return
	}
	go func() {
		if c, err := p.wait(); err == nil {
			Reset(c)
		}
	}()
}

// NameNotAllowed is Judge's answer for a name the policy does not allow;
// Explain replaces it with the names the address was allowed for.
const NameNotAllowed = "the name is not allowed"

// Judge returns why a connection whose first flight is f is refused
// under policy p, or "" when it may go on. The rule is the package's (an
// allowed name, exact or wildcard, not necessarily the one the address
// was learned for); the proxy judges its tunnels with it too.
func Judge(p *allowlist.Policy, f Flight) string {
	if f.Problem != "" {
		return f.Problem
	}
	if f.Proto == ProtoOther {
		return "" // neither TLS nor HTTP, where that passes (InspectAny)
	}
	if f.Name == "" {
		if f.Proto == ProtoTLS {
			return "a ClientHello without SNI names no host"
		}
		return "the request names no host"
	}
	if a, err := netip.ParseAddr(f.Name); err == nil {
		if p.AllowsAddr(a.Unmap()) {
			return ""
		}
		return "an IP address is not an allowed name"
	}
	if _, ok := p.MatchName(f.Name); !ok {
		return NameNotAllowed
	}
	// An allowed outer SNI says nothing of the inner one, which the
	// server routes by.
	if f.ECH {
		return "the ClientHello carries an Encrypted ClientHello, whose inner SNI sluice cannot read"
	}
	return ""
}

// Explain is the reason a user reads for Judge's why about a connection
// whose first flight named name, naming the names the connection's
// address was allowed for (none: why alone). A name that is not allowed
// is explained by those names alone: "the address was allowed for
// registry.npmjs.org". The refused name itself may be among them (the
// address was learned for it while it was allowed: a once approval or an
// entry since gone): the explanation then says that it is not allowed
// now, and never that the address was allowed for the very name it
// refuses.
func Explain(why, name string, allowedFor []string) string {
	var others []string
	learnedForName := false
	for _, n := range allowedFor {
		if name != "" && strings.EqualFold(strings.TrimSuffix(n, "."), strings.TrimSuffix(name, ".")) {
			learnedForName = true
			continue
		}
		others = append(others, n)
	}
	if learnedForName {
		if why == NameNotAllowed {
			why = name + " is not allowed now (the address was learned for it while it was)"
		} else {
			why += "; the address was learned for " + name
		}
	}
	if len(others) == 0 {
		return why
	}
	names := "the address was allowed for " + strings.Join(others, ", ")
	if learnedForName {
		names = "the address was also allowed for " + strings.Join(others, ", ")
	} else if why == NameNotAllowed {
		return names
	}
	return why + "; " + names
}

// NoFlightWithin is the problem of a client that sent no complete first
// flight within d (a protocol whose server speaks first, or a client
// that stalls).
func NoFlightWithin(d time.Duration) string {
	return "the client sent no complete first flight within " + d.String()
}

// ReadFlight reads r until inspect (Inspect or InspectAny) can judge what it read, MaxFlight
// bytes, or an error. It returns the bytes read, which belong to the
// connection (the caller sends them on, untouched), and the flight. The
// caller bounds the wait (a read deadline): a timeout before the flight
// is complete is ErrIncomplete; another read error is returned as it is,
// with a Flight that has no Problem unless the bytes so far were judged.
func ReadFlight(r io.Reader, inspect func([]byte) (Flight, error)) ([]byte, Flight, error) {
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(2*cap(buf), MaxFlight))
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		f, ierr := inspect(buf)
		if ierr == nil {
			return buf, f, nil
		}
		if len(buf) >= MaxFlight {
			return buf, Flight{Proto: f.Proto, Problem: "the first flight is longer than " + fmt.Sprint(MaxFlight) + " bytes"}, nil
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if f.Proto == "" {
					f.Proto = ProtoNone // nothing came
				}
				return buf, f, ErrIncomplete
			}
			return buf, f, err
		}
	}
}

// splice takes the dialled upstream connection, sends it first (what the
// client sent so far and is no longer queued), and carries both ways until both directions end: in the
// kernel (Config.Splice) or by copying.
func (v *Verifier) splice(c *net.TCPConn, pd pendingDial, first []byte) {
	uc, err := pd.wait()
	if err != nil {
		v.stats.Failed.Add(1)
		Reset(c)
		return
	}
	up, ok := uc.(*net.TCPConn)
	if !ok {
		uc.Close()
		Reset(c)
		return
	}
	if len(first) > 0 {
		if _, err := up.Write(first); err != nil {
			Reset(up)
			Reset(c)
			return
		}
	}
	if v.cfg.Splice != nil && v.cfg.Splice(c, up) {
		return
	}
	var wg sync.WaitGroup
	pipe := func(dst, src *net.TCPConn) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil {
			// A reset on one side is passed on as a reset.
			Reset(dst)
			Reset(src)
			return
		}
		_ = dst.CloseWrite()
	}
	wg.Add(2)
	go pipe(up, c)
	go pipe(c, up)
	wg.Wait()
	c.Close()
	up.Close()
}
