// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/proxy"
)

// The proxy part measures the allowlist proxy (issue 5) against the same
// traffic sent straight to the server, in alternating A/B rounds: new
// connections per second (a CONNECT tunnel per connection, one byte echoed,
// close) and one stream's bulk throughput through a tunnel. Proxy, clients
// and servers are this process, on loopback, as a confined program, sluice
// and a local server would share the machine's CPUs.

// Targets of the proxy part.
const (
	proxyMinConnRatio       = 0.5 // connections per second through the proxy / direct
	proxyMinThroughputRatio = 0.8 // one stream's bytes per second through the proxy / direct
)

// proxyBudget bounds the proxy part: rounds stop early rather than overrun.
const proxyBudget = 40 * time.Second

// proxyOptions are the proxy part's flags.
type proxyOptions struct {
	rounds  int
	dur     time.Duration // per arm
	clients int           // connections benchmark: concurrent clients
}

func addProxyFlags(fs *flag.FlagSet, on *bool, p *proxyOptions) {
	fs.BoolVar(on, "proxy", true, "run the allowlist proxy benchmark (through the proxy against direct, on loopback; about 30 s)")
	fs.IntVar(&p.rounds, "proxy-rounds", 5, "A/B rounds of the proxy benchmark")
	fs.DurationVar(&p.dur, "proxy-time", time.Second, "measured time per arm of the proxy benchmark")
	fs.IntVar(&p.clients, "proxy-clients", 2, "concurrent clients of the connections benchmark (one per CPU keeps both arms CPU-bound)")
}

func (p proxyOptions) validate() error {
	if p.rounds < 1 || p.rounds > 20 || p.dur <= 0 || p.dur > 5*time.Second || p.clients < 1 || p.clients > 64 {
		return errors.New("want 1 ≤ -proxy-rounds ≤ 20, 0 < -proxy-time ≤ 5s and 1 ≤ -proxy-clients ≤ 64")
	}
	return nil
}

// proxyResult is what the proxy part measured; A direct, B through the
// proxy. Series hold rates (per second), higher is better.
type proxyResult struct {
	opts    proxyOptions
	rounds  int
	conns   series // connections per second
	bytes   series // bytes per second
	tunnels uint64 // tunnels the proxy opened, all rounds
}

// streamChunk is the size of the writes of the throughput benchmark.
const streamChunk = 256 << 10

func measureProxy(ctx context.Context, o proxyOptions) (*proxyResult, error) {
	until := time.Now().Add(proxyBudget)
	echo, err := startTCPServer(func(c net.Conn) {
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err == nil {
			_, _ = c.Write(b)
		}
	})
	if err != nil {
		return nil, err
	}
	defer echo.Close()
	sink, err := startTCPServer(func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	if err != nil {
		return nil, err
	}
	defer sink.Close()

	// Every event is a refusal or a failure: there must be none.
	var events atomic.Uint64
	p, err := proxy.New(proxy.Config{OnEvent: func(proxy.Event) { events.Add(1) }})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	l, err := proxy.ListenLoopback(ctx)
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(l) }()
	defer func() {
		p.Close()
		<-served
	}()
	via := l.Addr().String()

	d := &proxyResult{opts: o}
	d.rounds, err = roundsWithin(o.rounds, until, func(r int) error {
		a, b, err := pair(r,
			func() (float64, error) { return connLoop(ctx, "", echo.Addr().String(), o.clients, o.dur) },
			func() (float64, error) { return connLoop(ctx, via, echo.Addr().String(), o.clients, o.dur) })
		if err != nil {
			return fmt.Errorf("connections: %w", err)
		}
		d.conns.add(a, b)
		fmt.Fprintf(os.Stderr, "bench: proxy round %d/%d, connections per second: direct %.0f, through the proxy %.0f\n", r+1, o.rounds, a, b)
		a, b, err = pair(r,
			func() (float64, error) { return stream(ctx, "", sink.Addr().String(), o.dur) },
			func() (float64, error) { return stream(ctx, via, sink.Addr().String(), o.dur) })
		if err != nil {
			return fmt.Errorf("throughput: %w", err)
		}
		d.bytes.add(a, b)
		fmt.Fprintf(os.Stderr, "bench: proxy round %d/%d, one stream: direct %.0f MB/s, through the proxy %.0f MB/s\n", r+1, o.rounds, a/1e6, b/1e6)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("proxy benchmark: %w", err)
	}
	d.tunnels = p.Stats().Connect.Allowed
	if n := events.Load(); n > 0 {
		return nil, fmt.Errorf("proxy benchmark: the proxy refused or failed %d requests to loopback, which it must allow", n)
	}
	return d, nil
}

// startTCPServer accepts on 127.0.0.1 and runs handle for each connection
// (then closes it) until the listener is closed.
func startTCPServer(handle func(net.Conn)) (net.Listener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return l, nil
}

// dial connects to target, straight or (via set) through a CONNECT tunnel
// of the proxy at via, ready for data.
func dial(via, target string) (net.Conn, error) {
	if via == "" {
		return net.Dial("tcp", target)
	}
	c, err := net.Dial("tcp", via)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		c.Close()
		return nil, err
	}
	// The 200 is read byte by byte so that nothing after it is taken from
	// the tunnel.
	br := bufio.NewReaderSize(c, 16)
	var head strings.Builder
	for !strings.HasSuffix(head.String(), "\r\n\r\n") {
		b, err := br.ReadByte()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("CONNECT reply: %w", err)
		}
		head.WriteByte(b)
		if head.Len() > 4096 {
			c.Close()
			return nil, errors.New("CONNECT reply too long")
		}
	}
	if !strings.HasPrefix(head.String(), "HTTP/1.1 200") {
		c.Close()
		return nil, fmt.Errorf("CONNECT refused: %q", strings.SplitN(head.String(), "\r\n", 2)[0])
	}
	return c, nil
}

// connLoop opens connections to the echo server for dur with clients
// concurrent clients (each: connect, send a byte, read it back, close),
// and returns connections per second.
func connLoop(ctx context.Context, via, target string, clients int, dur time.Duration) (float64, error) {
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	end := start.Add(dur)
	for range clients {
		wg.Go(func() {
			b := []byte{'x'}
			for time.Now().Before(end) && ctx.Err() == nil {
				c, err := dial(via, target)
				if err != nil {
					errs <- err
					return
				}
				_, werr := c.Write(b)
				_, rerr := io.ReadFull(c, b)
				c.Close()
				if err := errors.Join(werr, rerr); err != nil {
					errs <- err
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(n.Load()) / time.Since(start).Seconds(), ctx.Err()
}

// stream writes to the sink through one connection for dur and returns
// bytes per second.
func stream(ctx context.Context, via, target string, dur time.Duration) (float64, error) {
	c, err := dial(via, target)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, streamChunk)
	var sent int64
	start := time.Now()
	for time.Since(start) < dur && ctx.Err() == nil {
		n, err := c.Write(buf)
		sent += int64(n)
		if err != nil {
			return 0, err
		}
	}
	return float64(sent) / time.Since(start).Seconds(), ctx.Err()
}

// rows are the proxy lines of the results table.
func (d *proxyResult) rows() []tableRow {
	conn := qpsRow("allowlist proxy: new connections per second (CONNECT, 1-byte echo, close)", &d.conns, proxyMinConnRatio)
	conn.a, conn.b = fmt.Sprintf("%.0f/s", median(d.conns.a)), fmt.Sprintf("%.0f/s", median(d.conns.b))
	tput := qpsRow("allowlist proxy: one stream's throughput (spliced)", &d.bytes, proxyMinThroughputRatio)
	tput.a, tput.b = fmt.Sprintf("%.0f MB/s", median(d.bytes.a)/1e6), fmt.Sprintf("%.0f MB/s", median(d.bytes.b)/1e6)
	return []tableRow{conn, tput}
}

func (d *proxyResult) missed() bool {
	return median(d.conns.ratios()) < proxyMinConnRatio || median(d.bytes.ratios()) < proxyMinThroughputRatio
}

func (d *proxyResult) describe(w io.Writer) {
	fmt.Fprintf(w, "Proxy rows: A connects straight to a server on 127.0.0.1, B through sluice's allowlist proxy (proxy, default settings, listening as `sluice run` does) with an HTTP CONNECT per connection; "+
		"%d rounds, arms alternating, medians of the rounds, %s per arm. Connections: %d concurrent clients, each connecting, sending one byte, reading it back and closing. "+
		"Throughput: one connection writing %d KiB chunks to a server that discards them. Clients, proxy and servers are one process on the machine's %d CPUs (GOMAXPROCS %d); "+
		"the proxy opened %d tunnels and refused none.\n",
		d.rounds, d.opts.dur, d.opts.clients, streamChunk>>10, runtime.NumCPU(), runtime.GOMAXPROCS(0), d.tunnels)
}

// benchProxyOnly is `-only proxy`: the proxy part alone (no root needed).
func benchProxyOnly(ctx context.Context, o options) (missed bool, err error) {
	loadBefore := loadAverage()
	d, err := measureProxy(ctx, o.proxyOpts)
	if err != nil {
		return false, err
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "%s; load average %s at start, %s at end\n\n", machineSummary(o.sluice), loadBefore, loadAverage())
	writeTable(w, d.rows())
	fmt.Fprintln(w)
	d.describe(w)
	return d.missed(), nil
}
