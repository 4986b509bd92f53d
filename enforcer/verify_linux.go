// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/namecheck"
	"github.com/sluice-dev/sluice/netns"
)

// VerifyOptions configure a session's name verifier (package namecheck):
// every session with a resolver has one, since the addresses it learns
// are the ones a CDN shares with other names.
type VerifyOptions struct {
	// OnRefuse receives the verifier's refusals.
	OnRefuse func(namecheck.Refusal)
	// KernelSplice carries allowed connections in the kernel (a sockhash
	// and an sk_skb verdict redirect, loader.Splice) instead of
	// splice(2) through this process. Off by default: on Linux 6.18 the
	// kernel's redirect (a worker thread per destination, which waits a
	// clock tick whenever the send buffer fills) measured no faster than
	// splice(2) for bulk and adds a wake-up to each handshake flight
	// (docs/benchmarks.md); the benchmark keeps both side by side.
	KernelSplice bool
}

// startVerifier serves the session's verifier on loopback of the
// session's network namespace (where the datapath's redirect lands, as
// the DNS redirect's does) and points the datapath at it. Unlike the
// proxy's, the verifier's connection to the original address leaves from
// the session's namespace too: it stands in for the program's own.
func (s *Session) startVerifier(opts Options) error {
	var onRefuse func(namecheck.Refusal)
	if opts.Verify != nil {
		onRefuse = opts.Verify.OnRefuse
	}
	id := s.cg.ID()
	cfg := namecheck.Config{
		Policy: s.NamePolicy,
		Origin: func(peer netip.AddrPort) (namecheck.Origin, bool) {
			o, ok := s.e.dp.TakeOrigin(id, peer)
			return namecheck.Origin{Dst: o.Dst, PID: o.PID, Comm: o.Comm}, ok
		},
		OnRefuse: onRefuse,
		Audit:    opts.Audit,
	}
	cfg.LearnedFrom = s.LearnedFrom
	// Without the splice map's program the verifier copies the bytes of
	// an allowed connection through user space (splice(2)).
	if opts.Verify != nil && opts.Verify.KernelSplice && s.e.dp.PrepareSplice() == nil {
		dp := s.e.dp
		cfg.Splice = func(c, up *net.TCPConn) bool { return kernelSplice(dp, c, up) }
	}
	if s.netns != nil {
		// The program's connection leaves from its own namespace (a
		// container's routes and firewall), as it would have without
		// the verifier in the middle.
		d, err := newNSDialer(s.netns, 4)
		if err != nil {
			return err
		}
		s.verifyDial = d
		cfg.Dial = d.dial
	}
	v := namecheck.New(cfg)
	var l4, l6 net.Listener
	err := netns.Do(s.netns, func() (err error) {
		if l4, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
			return fmt.Errorf("name verifier: %w", err)
		}
		// Without IPv6 loopback the datapath sends IPv6 connections to
		// ::ffff:127.0.0.1, as it does DNS.
		l6, _ = net.Listen("tcp6", "[::1]:0")
		return nil
	})
	if err != nil {
		return err
	}
	s.verifier = v
	for _, l := range []net.Listener{l4, l6} {
		if l == nil {
			continue
		}
		port := uint16(l.Addr().(*net.TCPAddr).Port)
		s.verifyPorts = append(s.verifyPorts, port)
		if err := s.e.dp.SetListener(port, id); err != nil {
			l.Close()
			return err
		}
		go func() { _ = v.Serve(l) }()
	}
	p6 := uint16(0)
	if len(s.verifyPorts) > 1 {
		p6 = s.verifyPorts[1]
	}
	// The kernel's name check (ports 443 and 80) needs the names before
	// any connection is checked.
	s.mu.Lock()
	err = s.applyApprovals(s.policy)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.e.dp.SetVerifier(id, s.verifyPorts[0], p6)
}

// setNames gives the kernel's name check (bpf/sni.h) the names p allows,
// the ones the verifier's judgement (namecheck.Judge) takes: p is the
// session's NamePolicy (its policy and its approved names).
func (s *Session) setNames(p *allowlist.Policy) error {
	exact, wild := sniNames(p)
	if err := s.e.dp.SetNames(s.cg.ID(), exact, wild); err != nil {
		return fmt.Errorf("name verifier: %w", err)
	}
	return nil
}

// nsDialer dials from another network namespace: a socket belongs to the
// namespace of the thread that creates it, so a few goroutines locked to
// threads inside it take the dials (a thread per dial would cost a clone
// each), and a dial that finds them all busy gets a thread of its own.
type nsDialer struct {
	ns   *os.File
	reqs chan dialReq
	done chan struct{} // closed by close: the threads end, dials fail
	mu   sync.RWMutex  // held to use ns outside the threads; close takes it
	once sync.Once
}

type dialReq struct {
	ctx     context.Context
	network string
	addr    string
	res     chan dialRes
}

type dialRes struct {
	c   net.Conn
	err error
}

// newNSDialer starts n dialling threads in ns. It keeps a descriptor of
// its own for the namespace and returns once every thread is inside it:
// the caller's descriptor may be closed as soon as the session is set up
// (the daemon closes a container's when its attach returns), and a thread
// entering through a closed, or reused, descriptor number would fail, or
// dial from whatever namespace the number names then.
func newNSDialer(ns *os.File, n int) (*nsDialer, error) {
	fd, err := unix.FcntlInt(ns.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("name verifier: keep the session's network namespace: %w", err)
	}
	d := &nsDialer{ns: os.NewFile(uintptr(fd), ns.Name()), reqs: make(chan dialReq), done: make(chan struct{})}
	ready := make(chan error, n)
	for range n {
		go d.serve(ready)
	}
	var errs []error
	for range n {
		if err := <-ready; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		d.close()
		return nil, fmt.Errorf("name verifier: enter the session's network namespace: %w", errors.Join(errs...))
	}
	return d, nil
}

// serve is one dialling thread. It never unlocks: the thread ends with
// the goroutine (see package netns).
func (d *nsDialer) serve(ready chan<- error) {
	runtime.LockOSThread()
	if err := unix.Setns(int(d.ns.Fd()), unix.CLONE_NEWNET); err != nil {
		ready <- err
		return
	}
	ready <- nil
	var nd net.Dialer
	for {
		select {
		case r := <-d.reqs:
			c, derr := nd.DialContext(r.ctx, r.network, r.addr)
			r.res <- dialRes{c, derr}
		case <-d.done:
			return
		}
	}
}

// errDialerClosed is a dial after the session's end began.
var errDialerClosed = errors.New("name verifier: the session is closing")

// dial dials addr from the namespace: on an idle thread, or on one of its
// own when all are busy.
func (d *nsDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	r := dialReq{ctx: ctx, network: network, addr: addr, res: make(chan dialRes, 1)}
	select {
	case d.reqs <- r:
		res := <-r.res
		return res.c, res.err
	case <-d.done:
		return nil, errDialerClosed
	default:
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	select {
	case <-d.done:
		return nil, errDialerClosed
	default:
	}
	var c net.Conn
	err := netns.Do(d.ns, func() (err error) {
		var nd net.Dialer
		c, err = nd.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// close stops the dialling threads and lets the namespace go.
func (d *nsDialer) close() {
	d.once.Do(func() {
		close(d.done)
		d.mu.Lock()
		d.ns.Close()
		d.mu.Unlock()
	})
}

// VerifierStats are the session verifier's counters; ok is false without
// one.
func (s *Session) VerifierStats() (st *namecheck.Stats, ok bool) {
	if s.verifier == nil {
		return nil, false
	}
	return s.verifier.Stats(), true
}

// verifyMode is the datapath's mode for an address learned for name.
func verifyMode(p *allowlist.Policy, name string) loader.VerifyMode {
	e, ok := p.MatchName(name)
	if !ok {
		return 0
	}
	switch e.Verify {
	case allowlist.VerifyName:
		return loader.VerifyName
	case allowlist.VerifyAddress:
		return loader.VerifyAddress
	}
	return 0
}

// hasVerify reports whether an entry of p sets "verify".
func hasVerify(p *allowlist.Policy) bool {
	for _, e := range p.Names() {
		if e.Verify != allowlist.VerifyDefault {
			return true
		}
	}
	return false
}

// errVerifyKDNS keeps a session with "verify" entries on the resolver
// path: the kernel DNS path learns addresses without their entry's mode.
var errVerifyKDNS = errors.New(`an entry sets "verify": the session's DNS stays on the resolver path, which learns each address with its entry's rule`)
