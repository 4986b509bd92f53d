// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Command worker is the measured half of sluice's benchmark: the driver
// (tests/bench) starts it once per round, confined or not, and it runs one
// operation N times in a tight loop and prints its cost in nanoseconds per
// operation on stdout, nothing else.
//
// Operations are raw golang.org/x/sys/unix system calls, not the net
// package, so the figure is the kernel's cost (and sluice's BPF programs'),
// not the Go runtime's poller:
//
//	tcp      socket + connect + close to a loopback listener the worker owns
//	         (it accepts and closes each connection itself, untimed)
//	udp      sendto of 16 bytes from an unconnected socket to a loopback socket
//	connect  socket + connect + close to the -addrs in turn, each of which must
//	         fail at once for want of a route (ENETUNREACH, or EADDRNOTAVAIL
//	         for IPv6, which finds no source address first), after sluice's
//	         connect hook has judged it: the worker refuses to run unless its
//	         network namespace has no interface but loopback, so no packet
//	         can leave (the driver starts it in a fresh, empty namespace)
//	sockopt  setsockopt(TCP_NODELAY) on one TCP socket
//	dns      a DNS load generator (dns_linux.go): closed loop (-conc queries in
//	         flight) or open loop (-rate queries per second) of UDP queries to
//	         -addrs for -dur, unique or repeated names under bench.test; it
//	         prints one JSON line (answered queries, losses, latencies)
//	curl     the realistic job A (job_linux.go): -requests curl processes in
//	         turn, each a name lookup through glibc and a new connection to
//	         http://PREFIX-N.ZONE/; prints the job's wall time in ns
//	tls      -conns new TLS connections (connect and handshake with -sni) to
//	         -addrs, each timed; prints the times in ns (names_linux.go)
//	conn     the same without TLS: connect and close
//	bulk     one request (Host -sni) to -addrs, the answer read to its end;
//	         prints bytes per second
//	goclient the realistic job B: the same requests from one Go HTTP client
//	         with a new connection and lookup per request
//	cycle    a program's real cycle on an allowed remote address: socket,
//	         setsockopt SO_LINGER and TCP_NODELAY, connect, close, to a
//	         listener the worker owns on -addrs, a non-loopback address
//	         that the driver puts on the loopback interface of the
//	         worker's fresh namespace once it runs (the worker waits for
//	         it); the connect hook judges it (an LPM hit) like any remote
//	         destination. The same emptiness check as connect applies:
//	         nothing can leave.
//
// Usage:
//
//	worker -op tcp|udp|connect|cycle|sockopt [-n N] [-warmup N] [-chunks K] [-addrs A,B,...]
//
// The timed iterations run in K chunks and the figure is the median
// chunk's mean, so that one interrupted stretch does not move it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The loops must run on the main thread, whose id is the process id: that
// is the thread the driver raises the priority of (setpriority acts on one
// thread), to keep other work on the machine out of the figures. Locking in
// init is the documented way to have main run there.
func init() { runtime.LockOSThread() }

func main() {
	op := flag.String("op", "", "operation: tcp, udp, connect, cycle or sockopt")
	n := flag.Int("n", 10000, "timed iterations")
	warmup := flag.Int("warmup", 1000, "untimed iterations before the timed ones")
	chunks := flag.Int("chunks", 20, "split the timed iterations into this many chunks and report the median chunk")
	addrs := flag.String("addrs", "", "comma-separated destinations for -op connect; the listener's address for -op cycle; the server (ADDR:PORT) for -op dns")
	var d dnsLoad
	d.flags()
	var j jobLoad
	j.flags()
	var nl nameLoad
	nl.flags()
	flag.Parse()
	if *op == "tls" || *op == "bulk" || *op == "tlsbulk" || *op == "conn" {
		if err := nl.run(*op, *addrs); err != nil {
			fail(err)
		}
		return
	}
	if *op == "curl" || *op == "goclient" {
		if err := j.run(*op); err != nil {
			fail(err)
		}
		return
	}
	if *op == "dns" {
		if err := d.run(*addrs); err != nil {
			fail(err)
		}
		return
	}
	if *n <= 0 || *warmup < 0 || *chunks <= 0 || *chunks > *n {
		fail(errors.New("want -n > 0, -warmup ≥ 0 and 0 < -chunks ≤ -n"))
	}

	var loop func(int) (time.Duration, error)
	var err error
	switch *op {
	case "tcp":
		loop, err = tcpLoop()
	case "udp":
		loop, err = udpLoop()
	case "connect":
		loop, err = unreachableLoop(*addrs)
	case "cycle":
		loop, err = cycleLoop(*addrs)
	case "sockopt":
		loop, err = sockoptLoop()
	default:
		err = fmt.Errorf("unknown -op %q (want tcp, udp, connect, cycle or sockopt)", *op)
	}
	if err != nil {
		fail(err)
	}
	// The warm-up fills caches and lets the kernel settle (ephemeral port
	// hashing, slab caches) so the timed loop measures the steady state.
	if _, err := loop(*warmup); err != nil {
		fail(err)
	}
	// The median chunk, not the mean of all: on a shared (virtual) machine
	// a burst of a neighbour's work or a host interrupt lands in one chunk
	// and is left out, instead of shifting the whole run.
	per := *n / *chunks
	costs := make([]float64, *chunks)
	for i := range costs {
		elapsed, err := loop(per)
		if err != nil {
			fail(err)
		}
		costs[i] = float64(elapsed.Nanoseconds()) / float64(per)
	}
	slices.Sort(costs)
	fmt.Printf("%.1f\n", (costs[(len(costs)-1)/2]+costs[len(costs)/2])/2)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "worker: %v\n", err)
	os.Exit(1)
}

// loopback4 is 127.0.0.1 with port 0: the kernel picks the port.
func loopback4() *unix.SockaddrInet4 {
	return &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
}

// tcpLoop returns a loop of socket+connect+close against a loopback
// listener, timing only those three calls. The same thread then accepts the
// connection and closes it, untimed: accepting on another thread instead
// races with the client (a RST can beat connect's return and fail it with
// ECONNRESET) and puts a second CPU's scheduling into the figure.
func tcpLoop() (func(int) (time.Duration, error), error) {
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("listener socket: %w", err)
	}
	// Accepted sockets inherit SO_LINGER {on, 0}, so closing them sends a
	// RST to the client's orphaned FIN_WAIT2 socket: neither side enters
	// TIME_WAIT. Otherwise tens of thousands of TIME_WAIT sockets pile up,
	// the ephemeral port search slows down round after round and the
	// rounds stop being comparable.
	if err := unix.SetsockoptLinger(lfd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
		return nil, fmt.Errorf("listener SO_LINGER: %w", err)
	}
	if err := unix.Bind(lfd, loopback4()); err != nil {
		return nil, fmt.Errorf("bind listener to 127.0.0.1: %w", err)
	}
	if err := unix.Listen(lfd, 16); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	sa, err := unix.Getsockname(lfd)
	if err != nil {
		return nil, fmt.Errorf("listener address: %w", err)
	}
	return func(n int) (time.Duration, error) {
		var total time.Duration
		for i := 0; i < n; i++ {
			// On loopback the whole handshake runs inside connect, so the
			// connection is already in the accept queue when it returns.
			start := time.Now()
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return 0, fmt.Errorf("client socket: %w", err)
			}
			if err := unix.Connect(fd, sa); err != nil {
				unix.Close(fd)
				return 0, fmt.Errorf("connect to the loopback listener: %w", err)
			}
			unix.Close(fd)
			total += time.Since(start)

			afd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
			if err != nil {
				return 0, fmt.Errorf("accept: %w", err)
			}
			unix.Close(afd)
		}
		return total, nil
	}, nil
}

// cycleLoop returns a loop of what a client program does for each
// connection to an allowed remote host: socket, SO_LINGER, TCP_NODELAY,
// connect, close. The listener is on addr, which must be a local but not a
// loopback address (the driver puts it on lo in a namespace of its own), so
// that sluice judges the connect through the CIDR map, as it would a
// remote host's, and runs its setsockopt hook on both options. As in
// tcpLoop, accept and close are untimed and on this thread, and both ends
// linger 0, so no TIME_WAIT piles up.
func cycleLoop(addr string) (func(int) (time.Duration, error), error) {
	if err := requireEmptyNetns(); err != nil {
		return nil, err
	}
	a, err := netip.ParseAddr(strings.TrimSpace(addr))
	if err != nil || !a.Is4() || a.IsLoopback() {
		return nil, fmt.Errorf("-op cycle needs one non-loopback IPv4 -addrs, got %q", addr)
	}
	linger := &unix.Linger{Onoff: 1, Linger: 0}
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("listener socket: %w", err)
	}
	if err := unix.SetsockoptLinger(lfd, unix.SOL_SOCKET, unix.SO_LINGER, linger); err != nil {
		return nil, fmt.Errorf("listener SO_LINGER: %w", err)
	}
	// The driver configures this namespace from outside once the worker
	// runs: wait (bounded) for the address. Not by retrying bind, which
	// a fresh namespace, having no routing tables yet, allows for any
	// address.
	for deadline := time.Now().Add(5 * time.Second); !hasAddr(a); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not appear on an interface within 5s (the driver puts it on lo)", a)
		}
	}
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: a.As4()}); err != nil {
		return nil, fmt.Errorf("bind listener to %s: %w", a, err)
	}
	if err := unix.Listen(lfd, 16); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	sa, err := unix.Getsockname(lfd)
	if err != nil {
		return nil, fmt.Errorf("listener address: %w", err)
	}
	return func(n int) (time.Duration, error) {
		var total time.Duration
		for i := 0; i < n; i++ {
			start := time.Now()
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return 0, fmt.Errorf("client socket: %w", err)
			}
			if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, linger); err != nil {
				unix.Close(fd)
				return 0, fmt.Errorf("SO_LINGER: %w", err)
			}
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
				unix.Close(fd)
				return 0, fmt.Errorf("TCP_NODELAY: %w", err)
			}
			if err := unix.Connect(fd, sa); err != nil {
				unix.Close(fd)
				return 0, fmt.Errorf("connect to %s: %w (EPERM: the address is not in the session's CIDRs)", a, err)
			}
			unix.Close(fd)
			total += time.Since(start)

			afd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
			if err != nil {
				return 0, fmt.Errorf("accept: %w", err)
			}
			unix.Close(afd)
		}
		return total, nil
	}, nil
}

// sockoptLoop returns a loop of setsockopt(TCP_NODELAY) on one TCP
// socket: the cost every option a program sets pays for sluice's
// setsockopt hook, which never refuses this one.
func sockoptLoop() (func(int) (time.Duration, error), error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	return func(n int) (time.Duration, error) {
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, i&1); err != nil {
				return 0, fmt.Errorf("TCP_NODELAY: %w", err)
			}
		}
		return time.Since(start), nil
	}, nil
}

// udpLoop returns a loop of unconnected sendto to a loopback socket that
// never reads. Its queue fills within the warm-up and the kernel then drops
// each datagram at the receiving socket: the same work in both arms, less
// of it than a delivery, so sluice's fixed cost weighs more (the ratio errs
// on the pessimistic side), and no reader competes for the CPU.
func udpLoop() (func(int) (time.Duration, error), error) {
	rfd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("receiver socket: %w", err)
	}
	if err := unix.Bind(rfd, loopback4()); err != nil {
		return nil, fmt.Errorf("bind receiver to 127.0.0.1: %w", err)
	}
	dst, err := unix.Getsockname(rfd)
	if err != nil {
		return nil, fmt.Errorf("receiver address: %w", err)
	}
	sfd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sender socket: %w", err)
	}
	payload := make([]byte, 16)
	return func(n int) (time.Duration, error) {
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := unix.Sendto(sfd, payload, 0, dst); err != nil {
				return 0, fmt.Errorf("sendto: %w", err)
			}
		}
		return time.Since(start), nil
	}, nil
}

// unreachableLoop returns a loop of connects to addrs that must each fail
// with ENETUNREACH after the connect hook has judged them. It first makes
// sure that nothing could leave this network namespace.
func unreachableLoop(list string) (func(int) (time.Duration, error), error) {
	if err := requireEmptyNetns(); err != nil {
		return nil, err
	}
	type dest struct {
		family int
		sa     unix.Sockaddr
		addr   netip.Addr
	}
	var dests []dest
	for s := range strings.SplitSeq(list, ",") {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("-addrs: %w", err)
		}
		if a.Is4() {
			dests = append(dests, dest{unix.AF_INET, &unix.SockaddrInet4{Port: 443, Addr: a.As4()}, a})
		} else {
			dests = append(dests, dest{unix.AF_INET6, &unix.SockaddrInet6{Port: 443, Addr: a.As16()}, a})
		}
	}
	if len(dests) == 0 {
		return nil, errors.New("-op connect needs -addrs")
	}
	return func(n int) (time.Duration, error) {
		start := time.Now()
		for i := 0; i < n; i++ {
			d := dests[i%len(dests)]
			// Non-blocking, so that even a namespace that somehow had a
			// route could not make this loop wait on a handshake.
			fd, err := unix.Socket(d.family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return 0, fmt.Errorf("socket: %w", err)
			}
			err = unix.Connect(fd, d.sa)
			unix.Close(fd)
			// IPv4 finds no route; IPv6 finds no source address first.
			if !errors.Is(err, unix.ENETUNREACH) && !errors.Is(err, unix.EADDRNOTAVAIL) {
				return 0, fmt.Errorf("connect %s: got %v, want ENETUNREACH or EADDRNOTAVAIL (EPERM means the address is not in the session's CIDRs)", d.addr, err)
			}
		}
		return time.Since(start), nil
	}, nil
}

// hasAddr reports whether a is an address of an interface of this network
// namespace that is up.
func hasAddr(a netip.Addr) bool {
	ifs, err := net.Interfaces()
	if err != nil {
		return false
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, x := range addrs {
			if n, ok := x.(*net.IPNet); ok {
				if b, ok := netip.AddrFromSlice(n.IP); ok && b.Unmap() == a {
					return true
				}
			}
		}
	}
	return false
}

// requireEmptyNetns refuses to go on unless every interface of this network
// namespace is a loopback one: the connect loop must never send a packet.
func requireEmptyNetns() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("list interfaces: %w", err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 {
			return fmt.Errorf("refusing -op connect: interface %s exists, so packets could leave; run me in an empty network namespace", i.Name)
		}
	}
	return nil
}
