// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/loader"
)

// The name verification part (issue 18): a world namespace with a
// "CDN" address that the checked arm's session learned for a name
// (namesCDN), and an address that both confined arms allow by an IP entry
// (namesIP). Arms: unconfined, confined by address (the CDN address as an
// IP entry: not checked), confined by name (learned: every new TLS
// connection's ClientHello, and every HTTP connection's request head, is
// judged in the kernel, bpf/sni.h).
var (
	namesCDN = netip.MustParseAddr("203.0.113.80")
	namesIP  = netip.MustParseAddr("203.0.113.81")
)

const (
	namesBudget  = 60 * time.Second
	namesSNI     = "cdn.bench.test"
	namesBulk    = 512 << 20 // bytes of the HTTP bulk stream
	namesTLSBulk = 256 << 20 // bytes of the TLS bulk stream
	namesConns   = 300       // connections per arm and round
)

var namesArms = []string{"unconfined", "by address (IP entry)", "checked by name"}

// Targets: added time per new TLS connection (median) and the bulk
// stream's throughput ratio.
const (
	namesAddedTarget = 200 * time.Microsecond
	namesBulkTarget  = 0.9
	// Every port of a learned address is checked (issue 30): a connect
	// and close that sends nothing, and a TLS stream on another port.
	namesCycleTarget   = 1.05
	namesAltBulkTarget = 0.95
	namesAltPort       = 8443
	namesStreams       = 3 // TLS streams per arm, port and round: the best is kept
	namesCycleN        = 10_000
)

type namesResult struct {
	rounds int
	tls    [][]float64 // per arm: every connection's ns
	cycle  [][]float64 // per arm: every TCP connect+close to namesIP
	bulk   [][]float64 // per arm: bytes/s per round, HTTP on 80 (the verifier)
	tlsb   [][]float64 // per arm: bytes/s per round, TLS on 443 (the kernel's check)
	lcycle [][]float64 // per arm: ns per TCP cycle to cycleAddr (learned in the checked arm), per round
	altb   [][]float64 // per arm: bytes/s per round, TLS on namesAltPort
}

// namesWorld is the world namespace and its servers.
type namesWorld struct {
	ns *os.File
	ls []net.Listener
}

func startNamesWorld() (*namesWorld, error) {
	w := &namesWorld{}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends in the namespace
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
			for _, a := range []netip.Addr{namesCDN, namesIP} {
				if err == nil {
					err = netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}})
				}
			}
			if err != nil {
				return fmt.Errorf("loopback of the names world: %w", err)
			}
			for _, ap := range []string{"203.0.113.80:443", "203.0.113.80:80", "203.0.113.80:8443", "203.0.113.80:9",
				"203.0.113.81:443", "203.0.113.81:80", "203.0.113.81:9"} {
				l, err := net.Listen("tcp4", ap)
				if err != nil {
					return err
				}
				w.ls = append(w.ls, l)
			}
			return nil
		}()
	}()
	if err := <-errc; err != nil {
		w.close()
		return nil, err
	}
	cert, err := benchCert()
	if err != nil {
		w.close()
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	for _, l := range w.ls {
		port := l.Addr().(*net.TCPAddr).Port
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go serveNames(c, port, cfg)
			}
		}()
	}
	return w, nil
}

// serveNames: 443 and namesAltPort complete a TLS handshake and close
// (or stream); 80 reads a request head and sends namesBulk bytes; 9
// closes at once.
func serveNames(c net.Conn, port int, cfg *tls.Config) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	switch port {
	case 443, namesAltPort:
		tc := tls.Server(c, cfg)
		if tc.Handshake() != nil {
			return
		}
		// "bulk\n" asks for the stream; otherwise wait for the client's
		// close, so the server's close_notify does not race its timer.
		var req [5]byte
		if _, err := io.ReadFull(tc, req[:]); err != nil || string(req[:]) != "bulk\n" {
			_, _ = io.Copy(io.Discard, tc)
			return
		}
		buf := make([]byte, 256<<10)
		for sent := 0; sent < namesTLSBulk; sent += len(buf) {
			if _, err := tc.Write(buf); err != nil {
				return
			}
		}
	case 80:
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
		}
		buf := make([]byte, 256<<10)
		for sent := 0; sent < namesBulk; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}
}

func (w *namesWorld) close() {
	for _, l := range w.ls {
		l.Close()
	}
	if w.ns != nil {
		w.ns.Close()
	}
}

// prepare puts a worker into the world.
func (w *namesWorld) prepare() error {
	if err := unix.Setns(int(w.ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("join the names world: %w", err)
	}
	return nil
}

func benchCert() (tls.Certificate, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: namesSNI},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{namesSNI}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}, nil
}

// measureNames runs the part on an instance of its own.
func measureNames(ctx context.Context, instance string, rounds int) (*namesResult, error) {
	until := time.Now().Add(namesBudget)
	inst := instance + "-names"
	cfg := enforcer.Config{CgroupName: inst, PinDir: "/sys/fs/bpf/" + inst, StateDir: "/run/" + inst}
	if err := enforcer.Cleanup(cfg); err != nil {
		return nil, fmt.Errorf("remove leftovers of instance %s: %w", inst, err)
	}
	defer func() {
		if err := enforcer.Cleanup(cfg); err != nil {
			fmt.Fprintf(os.Stderr, "bench: cleaning up instance %s: %v\n", inst, err)
		}
	}()
	tmp, err := os.MkdirTemp("", "sluice-bench-names-")
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
	world, err := startNamesWorld()
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
	spawners := []jobSpawner{func(cmd *exec.Cmd, prepare func() error) error {
		return free.sess.StartWith(cmd, nobody, prepare)
	}}
	starters := []starter{free.sess}
	for i, entries := range [][]string{{namesCDN.String(), namesIP.String(), cycleAddr.String()}, {namesSNI, namesIP.String()}} {
		policy, err := allowlist.FromStrings(entries)
		if err != nil {
			return nil, err
		}
		s, err := e.NewSession(enforcer.Options{Policy: policy, NetNS: world.ns, DNS: &enforcer.DNSOptions{
			Path: enforcer.DNSPathResolver, Upstreams: []string{"127.0.0.1:1"}},
			Verify: &enforcer.VerifyOptions{}})
		if err != nil {
			return nil, fmt.Errorf("session: %w", err)
		}
		defer s.Close()
		if i >= 1 {
			// What the resolver would have learned for cdn.bench.test.
			if err := e.Datapath().Learn(s.ID(), namesCDN, loader.BootTime()+time.Hour); err != nil {
				return nil, err
			}
			// And for the connect cycle's address, as if learned for it.
			if err := e.Datapath().Learn(s.ID(), cycleAddr, loader.BootTime()+time.Hour); err != nil {
				return nil, err
			}
		}
		starters = append(starters, confinedArm{s})
		spawners = append(spawners, func(cmd *exec.Cmd, prepare func() error) error {
			return s.SpawnWith(cmd, nobody, prepare)
		})
	}
	run := func(a int, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, workerTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, worker, args...)
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.WaitDelay = time.Second
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := spawners[a](cmd, world.prepare); err != nil {
			return "", fmt.Errorf("start the worker: %w", err)
		}
		_ = unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, workerNice)
		if err := cmd.Wait(); err != nil {
			return "", fmt.Errorf("%s worker %v: %w%s", namesArms[a], args, err, quoteOutput(stderr.String()))
		}
		return strings.TrimSpace(stdout.String()), nil
	}
	floats := func(s string) ([]float64, error) {
		var out []float64
		for _, f := range strings.Fields(s) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return nil, fmt.Errorf("worker printed %q", s)
			}
			out = append(out, v)
		}
		return out, nil
	}
	res := &namesResult{tls: make([][]float64, len(namesArms)), cycle: make([][]float64, len(namesArms)), bulk: make([][]float64, len(namesArms)),
		tlsb: make([][]float64, len(namesArms)), lcycle: make([][]float64, len(namesArms)), altb: make([][]float64, len(namesArms))}
	res.rounds, err = roundsWithin(rounds, until, func(r int) error {
		order := []int{0, 1, 2}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, a := range order {
			out, err := run(a, "-op", "tls", "-addrs", netip.AddrPortFrom(namesCDN, 443).String(), "-sni", namesSNI, "-conns", fmt.Sprint(namesConns))
			if err != nil {
				return err
			}
			v, err := floats(out)
			if err != nil {
				return err
			}
			res.tls[a] = append(res.tls[a], v...)
			if out, err = run(a, "-op", "bulk", "-addrs", netip.AddrPortFrom(namesCDN, 80).String(), "-sni", namesSNI); err != nil {
				return err
			}
			if v, err = floats(out); err != nil || len(v) != 1 {
				return fmt.Errorf("bulk: %q %v", out, err)
			}
			res.bulk[a] = append(res.bulk[a], v[0])
		}
		// The connect+close cycles: to an IP entry, in blocks with the
		// arms interleaved, so that what else runs falls on every arm
		// alike; and the worker's own cycle (socket, connect, close with
		// SO_LINGER 0, in a network namespace of its own: the median of
		// its chunks) to cycleAddr, which the checked arm learned.
		for range 4 {
			for _, a := range order {
				out, err := run(a, "-op", "conn", "-addrs", netip.AddrPortFrom(namesIP, 9).String(), "-conns", fmt.Sprint(namesConns))
				if err != nil {
					return err
				}
				v, err := floats(out)
				if err != nil {
					return err
				}
				res.cycle[a] = append(res.cycle[a], v...)
			}
		}
		for _, a := range order {
			ns, err := runWorker(ctx, starters[a], worker, true, prepareCycleNetns,
				"-op", "cycle", "-n", fmt.Sprint(namesCycleN), "-warmup", "1000", "-chunks", "20", "-addrs", cycleAddr.String())
			if err != nil {
				return fmt.Errorf("%s: %w", namesArms[a], err)
			}
			res.lcycle[a] = append(res.lcycle[a], ns)
		}
		// The TLS streams: namesStreams per arm and port, the arms
		// interleaved, the best of each kept (a stream is slowed by
		// whatever else runs, never sped up).
		best := func(bs [][]float64, port uint16) error {
			top := make([]float64, len(namesArms))
			for range namesStreams {
				for _, a := range order {
					out, err := run(a, "-op", "tlsbulk", "-addrs", netip.AddrPortFrom(namesCDN, port).String(), "-sni", namesSNI)
					if err != nil {
						return err
					}
					v, err := floats(out)
					if err != nil || len(v) != 1 {
						return fmt.Errorf("tlsbulk on %d: %q %v", port, out, err)
					}
					top[a] = max(top[a], v[0])
				}
			}
			for a := range bs {
				bs[a] = append(bs[a], top[a])
			}
			return nil
		}
		if err := best(res.tlsb, 443); err != nil {
			return err
		}
		return best(res.altb, namesAltPort)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func fmtUs(ns float64) string { return fmt.Sprintf("%.0f µs", ns/1e3) }

// added is the checked arm's added time over unconfined at quantile q.
func (n *namesResult) added(q float64) float64 {
	return quantile(n.tls[2], q) - quantile(n.tls[0], q)
}

// tlsRatio and httpRatio are the checked arm's streams (TLS on 443, HTTP
// on 80) against unconfined.
func (n *namesResult) tlsRatio() float64  { return median(n.tlsb[2]) / median(n.tlsb[0]) }
func (n *namesResult) httpRatio() float64 { return median(n.bulk[2]) / median(n.bulk[0]) }

// cycleRatio and altRatio are the checked arm's connect+close to a
// learned address and TLS stream on namesAltPort against unconfined.
func (n *namesResult) cycleRatio() float64 {
	return quantile(n.lcycle[2], 0.5) / quantile(n.lcycle[0], 0.5)
}
func (n *namesResult) altRatio() float64 { return median(n.altb[2]) / median(n.altb[0]) }

func (n *namesResult) missed() bool {
	return n.added(0.5) > float64(namesAddedTarget) || n.tlsRatio() < namesBulkTarget || n.httpRatio() < namesBulkTarget ||
		n.cycleRatio() > namesCycleTarget || n.altRatio() < namesAltBulkTarget
}

func (n *namesResult) write(w io.Writer) {
	fmt.Fprintln(w, "| name verification | unconfined | by address (IP entry) | checked by name | target | result |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | --- |")
	for _, q := range []struct {
		name string
		q    float64
	}{{"median", 0.5}, {"p99", 0.99}} {
		fmt.Fprintf(w, "| new TLS connection (connect + handshake), %s | %s | %s | %s (%+.0f µs) | ", q.name,
			fmtUs(quantile(n.tls[0], q.q)), fmtUs(quantile(n.tls[1], q.q)), fmtUs(quantile(n.tls[2], q.q)), n.added(q.q)/1e3)
		if q.q == 0.5 {
			fmt.Fprintf(w, "< %s added | %s |\n", fmtUs(float64(namesAddedTarget)), verdict(n.added(0.5) <= float64(namesAddedTarget)))
		} else {
			fmt.Fprintln(w, "report | |")
		}
	}
	fmt.Fprintf(w, "| bulk TLS stream through a checked connection, port 443 (%d MiB) | %.0f MB/s | %.0f MB/s | %.0f MB/s (%.2f×) | ≥ %.1f× | %s |\n", namesTLSBulk>>20,
		median(n.tlsb[0])/1e6, median(n.tlsb[1])/1e6, median(n.tlsb[2])/1e6, n.tlsRatio(), namesBulkTarget, verdict(n.tlsRatio() >= namesBulkTarget))
	fmt.Fprintf(w, "| bulk HTTP stream through a checked connection, port 80 (%d MiB) | %.0f MB/s | %.0f MB/s | %.0f MB/s (%.2f×) | ≥ %.1f× | %s |\n", namesBulk>>20,
		median(n.bulk[0])/1e6, median(n.bulk[1])/1e6, median(n.bulk[2])/1e6, n.httpRatio(), namesBulkTarget, verdict(n.httpRatio() >= namesBulkTarget))
	c0 := quantile(n.cycle[0], 0.5)
	ratio := func(a int) string {
		return fmt.Sprintf("%s (%.2f×)", fmtUs(quantile(n.cycle[a], 0.5)), quantile(n.cycle[a], 0.5)/c0)
	}
	fmt.Fprintf(w, "| TCP connect + close to an IP entry (not checked), median | %s | %s | %s | unchanged | report |\n",
		fmtUs(c0), ratio(1), ratio(2))
	l0 := quantile(n.lcycle[0], 0.5)
	fmt.Fprintf(w, "| TCP cycle (socket, connect, close) to a learned address (checked: every port), median round | %s | %s (%.2f×) | %s (%.2f×) | ≤ %.2f× | %s |\n",
		fmtUs(l0), fmtUs(quantile(n.lcycle[1], 0.5)), quantile(n.lcycle[1], 0.5)/l0, fmtUs(quantile(n.lcycle[2], 0.5)), n.cycleRatio(),
		namesCycleTarget, verdict(n.cycleRatio() <= namesCycleTarget))
	fmt.Fprintf(w, "| bulk TLS stream through a checked connection, port %d (%d MiB) | %.0f MB/s | %.0f MB/s | %.0f MB/s (%.2f×) | ≥ %.2f× | %s |\n", namesAltPort, namesTLSBulk>>20,
		median(n.altb[0])/1e6, median(n.altb[1])/1e6, median(n.altb[2])/1e6, n.altRatio(), namesAltBulkTarget, verdict(n.altRatio() >= namesAltBulkTarget))
}

func (n *namesResult) describe(w io.Writer) {
	fmt.Fprintf(w, "Name verification: %d rounds, arms alternating, as uid 65534 in a network namespace of its own (servers on %s and %s on its loopback, this process). "+
		"Each round: %d new TLS connections per arm (connect and TLS 1.3 handshake with SNI %s, close), "+
		"%d TCP connects to %s:9 (an IP entry in both sessions) in blocks of %d with the arms interleaved, one run of %d TCP cycles (socket, SO_LINGER 0, connect, close) to %s in a network namespace of the worker's own (an IP entry in the by-address arm, learned in the checked arm: marked, as every port is), %d TLS streams of %d MiB per arm to port 443 and as many to port %d, each read through one connection, the arms interleaved and each arm's best kept, and one %d MiB stream read through one HTTP connection to port 80; "+
		"in the checked arm the kernel judges the ClientHello's SNI and the request's Host on the client's own socket (bpf/sni.h). "+
		"Quantiles are over every connection of every round; the bulk figures are the median round.\n",
		n.rounds, namesCDN, namesIP, namesConns, namesSNI, 4*namesConns, namesIP, namesConns, namesCycleN, cycleAddr, namesStreams, namesTLSBulk>>20, namesAltPort, namesBulk>>20)
}

// benchNamesOnly is `-only names`.
func benchNamesOnly(ctx context.Context, o options) (missed bool, err error) {
	loadBefore := loadAverage()
	n, err := measureNames(ctx, o.instance, o.namesRounds)
	if err != nil {
		return false, err
	}
	sluice, _ := filepath.Abs(o.sluice)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "%s; load average %s at start, %s at end\n\n", machineSummary(sluice), loadBefore, loadAverage())
	n.write(w)
	fmt.Fprintln(w)
	n.describe(w)
	return n.missed(), nil
}
