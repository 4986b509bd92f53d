// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
)

// Defaults of Config.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultIdleTimeout = 2 * time.Minute
)

// ErrClosed is what Serve returns after Close.
var ErrClosed = errors.New("proxy: closed")

// Config configures a Proxy. Every field is optional.
type Config struct {
	// Policy returns the policy in force. It is called for every CONNECT,
	// SOCKS5 request and absolute-form HTTP request, so a daemon can swap
	// policies without restarting the proxy; connections already made are
	// kept. nil, or a nil result, allows loopback only.
	Policy func() *allowlist.Policy

	// Resolve looks up the addresses of an allowed, normalized host name.
	// Default: net.DefaultResolver.LookupNetIP(ctx, "ip", host). sluice's
	// sessions pass their own resolver's (dnsresolver.LookupNetIP), so the
	// proxy and the session's programs get the same answers from the same
	// upstreams. The proxy drops rebinding addresses from whatever Resolve
	// returns; a resolver that already dropped them all may say so with an
	// *addrclass.RefusedError, which the proxy answers as its own refusal.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)

	// Dial connects to an address the policy allowed; network is "tcp4" or
	// "tcp6" to match addr. Default: a net.Dialer. Tests use it to dial from
	// inside a network namespace; a daemon could use it to mark or bind
	// sockets. Tunnels splice data only when it returns a *net.TCPConn.
	Dial func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error)

	// Admit, if set, is called for every accepted connection before a
	// byte is read; an error closes the connection and is reported as a
	// refusal. It is where a daemon can check that the peer belongs to the
	// session this proxy serves.
	Admit func(net.Conn) error

	// OnEvent receives refusals, malformed requests, failures and
	// rebinding drops. It is called synchronously on the connection's
	// goroutine: keep it short.
	OnEvent func(Event)

	// Timeout bounds each wait before a connection is established: reading
	// a request head or a SOCKS5 handshake, writing a reply, resolving a
	// name, and dialling (all addresses of a name together). Default
	// DefaultTimeout.
	Timeout time.Duration

	// IdleTimeout bounds the wait for the next request on a keep-alive
	// HTTP connection. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
}

// Proxy is an allowlist proxy; see the package documentation.
type Proxy struct {
	cfg    Config
	ctx    context.Context // cancelled by Close: aborts resolutions and dials
	cancel context.CancelFunc
	stats  stats

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
}

// New checks cfg, fills in its defaults and returns a proxy that serves
// nothing until Serve is called.
func New(cfg Config) (*Proxy, error) {
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("proxy: negative timeout %v", cfg.Timeout)
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("proxy: negative idle timeout %v", cfg.IdleTimeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.Resolve == nil {
		cfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if cfg.Dial == nil {
		// Keep-alive probes exist to find peers that vanished without a
		// word; a loopback peer cannot (the kernel ends its connections
		// when it dies), so loopback upstreams skip the four setsockopt
		// calls that enable them.
		var remote net.Dialer
		local := net.Dialer{KeepAlive: -1}
		cfg.Dial = func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error) {
			d := &remote
			if addr.Addr().IsLoopback() {
				d = &local
			}
			return d.DialContext(ctx, network, addr.String())
		}
	}
	p := &Proxy{
		cfg:       cfg,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// policy returns the policy in force; nil is a valid, empty policy.
func (p *Proxy) policy() *allowlist.Policy {
	if p.cfg.Policy == nil {
		return nil
	}
	return p.cfg.Policy()
}

// Stats returns a snapshot of the proxy's counters.
func (p *Proxy) Stats() Stats { return p.stats.snapshot() }

// Serve accepts connections on l until Close, and returns ErrClosed then.
// Each connection may speak SOCKS5 or HTTP (CONNECT and absolute-form
// requests): the first byte tells them apart. Serve may be called for
// several listeners at once (IPv4 and IPv6 loopback, say). Serve closes l
// when it returns.
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return ErrClosed
	}
	p.listeners[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
		l.Close()
	}()

	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if p.isClosed() {
				return ErrClosed
			}
			// EMFILE, ENFILE, ECONNABORTED...: wait and retry, as
			// net/http does, rather than give up serving the session.
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(backoff):
				case <-p.ctx.Done():
				}
				continue
			}
			return fmt.Errorf("proxy: accept on %v: %w", l.Addr(), err)
		}
		backoff = 0
		if !p.track(c, true) {
			c.Close()
			return ErrClosed
		}
		go func() {
			defer p.wg.Done()
			p.serveConn(c)
		}()
	}
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// track registers c so that Close can end it; false after Close. For a
// client connection it also counts the handler that Close waits for, under
// the same lock, so that Close cannot start waiting before it is counted.
func (p *Proxy) track(c net.Conn, handler bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	if handler {
		p.wg.Add(1)
	}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Close stops every Serve, closes every client and upstream connection
// (open tunnels end: a session that ends takes its connections with it) and
// waits for the connection handlers to return.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	p.cancel()
	var errs []error
	for l := range p.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("proxy: closing listener %v: %w", l.Addr(), err))
		}
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return errors.Join(errs...)
}

// emit delivers an event and counts it.
func (p *Proxy) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if c := p.stats.of(e.Protocol); c != nil {
		switch e.Kind {
		case EventRefused:
			c.refused.Add(1)
		case EventFailed:
			c.failed.Add(1)
		}
	}
	if e.Kind == EventMalformed {
		p.stats.malformed.Add(1)
	}
	if p.cfg.OnEvent != nil {
		p.cfg.OnEvent(e)
	}
}

// emitFailure reports f for the request described by ev.
func (p *Proxy) emitFailure(ev Event, f *failure) {
	ev.Kind = f.kind
	ev.Reason = f.reason
	if f.addr.IsValid() {
		ev.Addr = f.addr
	}
	p.emit(ev)
}

// maxHeadBytes bounds a request or response head (request line or status
// line and header fields), like http.Server's MaxHeaderBytes.
const maxHeadBytes = 64 << 10

// clientConn is one accepted connection while its request is read.
type clientConn struct {
	net.Conn
	peer netip.AddrPort
	lim  *limitedReader // under br: bounds heads
	br   *bufio.Reader
}

// limitedReader makes a read past its budget fail, so that a head cannot
// grow without bound; the budget is lifted once a head is read.
type limitedReader struct {
	r io.Reader
	n int64
}

var errHeadTooLarge = errors.New("request head too large")

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	return n, err
}

func (l *limitedReader) limit(n int64) { l.n = n }
func (l *limitedReader) unlimit()      { l.n = math.MaxInt64 }

// bufPool recycles the readers of client connections: a tunnel drains and
// returns its reader as soon as the handshake is over.
var bufPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// serveConn sniffs the protocol and hands the connection over.
func (p *Proxy) serveConn(c net.Conn) {
	p.stats.active.Add(1)
	defer func() {
		c.Close()
		p.untrack(c)
		p.stats.active.Add(-1)
	}()
	cc := &clientConn{Conn: c, peer: addrPortOf(c.RemoteAddr())}
	if p.cfg.Admit != nil {
		if err := p.cfg.Admit(c); err != nil {
			p.emit(Event{Kind: EventRefused, Client: cc.peer, Reason: fmt.Sprintf("client not admitted: %v", err)})
			return
		}
	}
	cc.lim = &limitedReader{r: c, n: maxHeadBytes}
	cc.br = bufPool.Get().(*bufio.Reader)
	cc.br.Reset(cc.lim)
	defer cc.releaseReader()

	_ = c.SetReadDeadline(time.Now().Add(p.cfg.Timeout))
	first, err := cc.br.Peek(1)
	if err != nil {
		// A client that connects and leaves without a word (a port check)
		// is not worth an event; one that stays silent is.
		if isTimeout(err) {
			p.emit(Event{Kind: EventMalformed, Client: cc.peer,
				Reason: fmt.Sprintf("no request within %v", p.cfg.Timeout)})
		}
		return
	}
	switch first[0] {
	case socksVersion5:
		p.serveSOCKS5(cc)
	case socksVersion4:
		p.refuseSOCKS4(cc)
	default:
		p.serveHTTP(cc)
	}
}

// releaseReader returns the client's reader to the pool. Tunnels call it
// once they have drained it, so a long tunnel does not pin 4 KiB.
func (cc *clientConn) releaseReader() {
	if cc.br == nil {
		return
	}
	cc.br.Reset(nil)
	bufPool.Put(cc.br)
	cc.br = nil
}

// openUpstream dials the addresses decide returned and registers the
// connection so that Close ends it; addr is the address it reached.
func (p *Proxy) openUpstream(addrs []netip.Addr, port uint16) (up net.Conn, addr netip.Addr, f *failure) {
	up, addr, f = p.dial(p.ctx, addrs, port)
	if f != nil {
		return nil, addr, f
	}
	if !p.track(up, false) {
		up.Close()
		return nil, addr, &failure{kind: EventFailed, reason: "proxy is shutting down",
			status: 503, socks: socksGeneralFailure, proxyStatus: "proxy_internal_error"}
	}
	return up, addr, nil
}

// closeUpstream closes and forgets an upstream connection.
func (p *Proxy) closeUpstream(up net.Conn) {
	up.Close()
	p.untrack(up)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// addrPortOf converts a TCP address; anything else (a test's pipe) is the
// zero AddrPort.
func addrPortOf(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// ListenLoopback listens on 127.0.0.1 on a kernel-chosen port, for Serve.
// Accepted connections get no TCP keep-alive: the proxy's clients are on
// this machine, where a vanished peer cannot go unnoticed by the kernel,
// and the default keep-alive costs four setsockopt calls per connection.
func ListenLoopback(ctx context.Context) (net.Listener, error) { return ListenLoopbackOn(ctx, 0) }

// ListenLoopbackOn is ListenLoopback on a given port (0: kernel-chosen).
// A proxy restarted for programs that were told its address (HTTPS_PROXY
// cannot be changed in a running process) must come back on that port.
func ListenLoopbackOn(ctx context.Context, port uint16) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1}
	l, err := lc.Listen(ctx, "tcp", netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port).String())
	if err != nil {
		return nil, fmt.Errorf("proxy: listen on loopback: %w", err)
	}
	return l, nil
}
