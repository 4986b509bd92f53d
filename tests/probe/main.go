// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Command probe is the confined program of sluice's end-to-end tests: it
// performs exactly one network action and prints exactly one JSON line that
// says what the kernel answered, for example
//
//	{"op":"tcp","ok":true,"reply":"hello\n"}
//	{"op":"tcp","ok":false,"errno":"EPERM","error":"connect: operation not permitted","stage":"connect"}
//
// The exit status is 0 when the action succeeded, 1 when it failed and 2 on a
// usage error. Every action is bounded by -timeout (default 2s), and a
// watchdog ends the process shortly after that, so a test can never hang on a
// probe.
//
// Actions are written with raw golang.org/x/sys/unix system calls, not the
// net package, so that a test sees the very syscall (the "stage") and errno
// that the kernel, and sluice's BPF programs, produced. Sockets are
// non-blocking and waited for with poll(2) against the deadline, which keeps
// each syscall's own errno visible while still bounding every wait.
//
// Usage:
//
//	probe [-timeout D] ACTION ARGS...
//
//	tcp ADDR PORT               connect, read the server's greeting
//	udp ADDR PORT               unconnected sendto, wait for the echo
//	udp-connected ADDR PORT     connect, send, wait for the echo
//	sendmmsg ADDR PORT          unconnected sendmmsg of 2 datagrams, wait for an echo
//	tfo ADDR PORT               TCP Fast Open: sendto(MSG_FASTOPEN) on an unconnected socket
//	iouring ADDR PORT           IORING_OP_CONNECT through a hand-built io_uring
//	ping ADDR                   ICMP echo through an unprivileged ping socket
//	raw ADDR                    ICMP echo through a SOCK_RAW socket (needs CAP_NET_RAW)
//	sctp ADDR PORT              SCTP connect ("unsupported":true without kernel SCTP)
//	srh ALLOWED6 DENIED6 PORT   TCP connect to ALLOWED6 with a sticky IPv6 segment routing
//	                            header whose first hop is DENIED6
//	srh-udp ALLOWED6 DENIED6 PORT   the same steering for an unconnected UDP sendto
//	srh-cmsg ALLOWED6 DENIED6 PORT  the same steering for UDP through an IPV6_RTHDR cmsg
//	lsrr ALLOWED4 DENIED4 PORT  TCP connect to ALLOWED4 with an IPv4 loose source route
//	                            option whose first hop is DENIED4
//	daemonize OUTFILE ACTION ARGS...  double fork + setsid; the grandchild runs ACTION
//	                            once its parent is gone and writes its JSON line to OUTFILE
//	escape-cgroup ACTION ARGS...      try to move into every ancestor cgroup, then run ACTION
//	dns SERVER PORT NAME TYPE MODE    one DNS query (MODE udp = connected UDP socket like dig,
//	                            udp-unconnected = sendto/recvfrom, tcp); reports rcode,
//	                            answers, and the reply's source (recvfrom / getpeername)
//	dns-raw SERVER PORT HOW HEX one UDP send of the bytes HEX (HOW: plain, gso-sockopt:N,
//	                            gso-cmsg:N, more:N, cork:N; see dnsraw.go); reports the
//	                            first reply's rcode, if any
//	resolve NAME                the Go resolver (reads /etc/resolv.conf), reports addresses
//	resolve-tcp NAME PORT       resolve NAME, then TCP-connect to its first address
//	tls-attack NAME|ADDR 4|6 PORT SNI HOW  TLS with the SNI given, its ClientHello put on
//	                            the socket the way HOW says (plain, bytes, more, oob, zerocopy,
//	                            sendfile, splice, uring, reconnect:NAME, fastopen,
//	                            fastopen-connect, ktls, early; see tlsattack.go)
//	proxy-connect HOST PORT     HTTP CONNECT to HOST:PORT through $HTTPS_PROXY, read the greeting
//	socket FAMILY TYPE          socket(FAMILY, TYPE, 0) and close it (numbers, e.g. 40 1 for AF_VSOCK)
//	socket-proto FAMILY TYPE PROTO  socket(FAMILY, TYPE, PROTO) and close it (2 1 262: MPTCP)
//	listen-go ADDR              net.Listen("tcp", ADDR:0) as a Go server does (MPTCP first,
//	                            then TCP); reply: the bound address
//	daemon-run SOCKET PATH      ask the sluice daemon on SOCKET to run PATH as uid 65534
//	api-handoff SOCKET DIR      connect to the daemon, hand the connection to a child and
//	                            exit (reply: this pid); the child sends a session request once
//	                            DIR/go exists and writes the answer to DIR/result
//	unix PATH|@NAME             connect a stream unix socket (@NAME: abstract), read the greeting
//	unix-dgram PATH|@NAME       sendto on an unconnected datagram unix socket
//	unix-serve PATH|@NAME       listen on a stream unix socket, serve the greeting to one
//	                            client (another process of the session), then exit
//	tcp-self                    listen on 127.0.0.1 (kernel-chosen port), connect to it, read
//	                            the greeting the listener sends
//	hold OUTFILE                open an unconnected UDP and TCP socket, write "PID UDPFD TCPFD"
//	                            to OUTFILE, wait until the deadline (the victim of the next four)
//	getfd PID FD tcp|udp ADDR PORT  pidfd_getfd FD from PID, then connect / sendto with it
//	vm-write PID HEXADDR        process_vm_readv one byte of PID and process_vm_writev it back
//	mem-write PID HEXADDR       the same through /proc/PID/mem
//	signal PID                  kill(PID, SIGCONT)
//	ptrace-inject PID ADDR PORT attach to PID and make it socket()+sendto() a datagram (amd64)
//
// ADDR may be an IPv4, IPv6 or IPv4-mapped IPv6 address; an IPv4-mapped
// address is used through an AF_INET6 socket, which is how such a destination
// reaches sluice's connect6 hook.
//
// The tfo action needs the client bit (1) in net.ipv4.tcp_fastopen of the
// namespace it runs in; that is the kernel default. Without a cookie the first
// attempt sends a plain SYN with a cookie request, and later attempts carry the
// data in the SYN when the server has TFO enabled.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"
)

// Exit statuses, part of the probe's contract with the tests.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// action is one thing the probe can do. run fills r with extras and returns
// the failure, if any; main turns the failure into ok/errno/error/stage.
type action struct {
	args  string // argument synopsis for usage
	nargs int    // exact number of arguments; -1 for "at least one"
	run   func(args []string, r *result) error
}

// actions is filled in by init so that meta-actions (daemonize,
// escape-cgroup) can look other actions up without an initialisation cycle.
var actions map[string]action

func init() {
	actions = map[string]action{
		"tcp":           {"ADDR PORT", 2, runTCP},
		"udp":           {"ADDR PORT", 2, runUDP},
		"udp-connected": {"ADDR PORT", 2, runUDPConnected},
		"sendmmsg":      {"ADDR PORT", 2, runSendmmsg},
		"tfo":           {"ADDR PORT", 2, runTFO},
		"iouring":       {"ADDR PORT", 2, runIOURing},
		"ping":          {"ADDR", 1, runPing},
		"raw":           {"ADDR", 1, runRaw},
		"sctp":          {"ADDR PORT", 2, runSCTP},
		"srh":           {"ALLOWED6 DENIED6 PORT", 3, runSRH},
		"srh-udp":       {"ALLOWED6 DENIED6 PORT", 3, runSRHUDP},
		"srh-cmsg":      {"ALLOWED6 DENIED6 PORT", 3, runSRHCmsg},
		"lsrr":          {"ALLOWED4 DENIED4 PORT", 3, runLSRR},
		"daemonize":     {"OUTFILE ACTION ARGS...", -1, runDaemonize},
		"escape-cgroup": {"ACTION ARGS...", -1, runEscapeCgroup},
		"dns":           {"SERVER PORT NAME TYPE udp|udp-unconnected|tcp", 5, runDNS},
		"dns-raw":       {"SERVER PORT HOW HEX", 4, runDNSRaw},
		"resolve":       {"NAME", 1, runResolve},
		"resolve-tcp":   {"NAME PORT", 2, runResolveTCP},
		"tls-name":      {"NAME|ADDR 4|6|proxy|socks PORT SNI|-", 4, runTLSName},
		"http-name":     {"NAME|ADDR 4|6|proxy|socks PORT HOST", 4, runHTTPName},
		"send-name":     {"NAME|ADDR 4|6|proxy|socks PORT LINE", 4, runSendName},
		"banner-reply":  {"NAME|ADDR 4|6|proxy|socks PORT LINE", 4, runBannerReply},
		"http-raw":      {"NAME|ADDR 4|6 PORT BASE64 CHUNK", 5, runHTTPRaw},
		"udp-name":      {"NAME|ADDR 4|6 PORT", 3, runUDPName},
		"tls-ech":       {"NAME|ADDR 4|6|proxy|socks PORT SNI OUTER", 5, runTLSECH},
		"tls-attack":    {"NAME|ADDR 4|6 PORT SNI HOW", 5, runTLSAttack},
		"proxy-connect": {"HOST PORT", 2, runProxyConnect},
		"socket":        {"FAMILY TYPE", 2, runSocket},
		"socket-proto":  {"FAMILY TYPE PROTO", 3, runSocketProto},
		"listen-go":     {"ADDR", 1, runListenGo},
		"daemon-run":    {"SOCKET PATH", 2, runDaemonRun},
		"api-handoff":   {"SOCKET DIR", 2, runAPIHandoff},
		"unix":          {"PATH|@NAME", 1, runUnix},
		"unix-dgram":    {"PATH|@NAME", 1, runUnixDgram},
		"unix-serve":    {"PATH|@NAME", 1, runUnixServe},
		"tcp-self":      {"", 0, runTCPSelf},
		"hold":          {"OUTFILE", 1, runHold},
		"getfd":         {"PID FD tcp|udp ADDR PORT", 5, runGetfd},
		"vm-write":      {"PID HEXADDR", 2, runVMWrite},
		"mem-write":     {"PID HEXADDR", 2, runMemWrite},
		"signal":        {"PID", 1, runSignal},
		"ptrace-inject": {"PID ADDR PORT", 3, runPtraceInject},
	}
}

// Global state set once from the command line.
var (
	timeout  time.Duration // per-action bound, from -timeout
	deadline time.Time     // when the current action must give up
)

// Hidden flags used by daemonize to re-execute the probe; see daemonize.go.
var (
	daemonStage  = flag.Int("daemon-stage", 0, "")
	daemonParent = flag.Int("daemon-parent", 0, "")
	handoff      = flag.Bool("handoff-child", false, "")
)

func main() {
	flag.DurationVar(&timeout, "timeout", 2*time.Second, "bound for the whole action")
	flag.Usage = usage
	flag.Parse()
	if timeout <= 0 {
		fmt.Fprintln(os.Stderr, "probe: -timeout must be positive")
		os.Exit(exitUsage)
	}
	args := flag.Args()
	if err := checkUsage(args); err != nil {
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		usage()
		os.Exit(exitUsage)
	}

	if *handoff {
		os.Exit(handoffChild(args[2]))
	}
	switch *daemonStage {
	case 1:
		os.Exit(daemonStage1(args))
	case 2:
		os.Exit(daemonStage2(args))
	}

	deadline = time.Now().Add(timeout)
	startWatchdog(stdoutSink, args[0])
	os.Exit(emit(stdoutSink, perform(args)))
}

// checkUsage validates an action line, including the action nested in a
// meta-action, so that a mistake is a usage error (exit 2) and never a
// misleading network failure.
func checkUsage(args []string) error {
	if len(args) == 0 {
		return errors.New("no action")
	}
	a, ok := actions[args[0]]
	if !ok {
		return fmt.Errorf("unknown action %q", args[0])
	}
	rest := args[1:]
	switch args[0] {
	case "daemonize":
		if len(rest) < 2 {
			return errors.New("daemonize: missing OUTFILE or ACTION")
		}
		if rest[1] == "daemonize" {
			return errors.New("daemonize: nested daemonize")
		}
		return checkUsage(rest[1:])
	case "escape-cgroup":
		if len(rest) < 1 {
			return errors.New("escape-cgroup: missing ACTION")
		}
		if rest[0] == "daemonize" || rest[0] == "escape-cgroup" {
			return fmt.Errorf("escape-cgroup: cannot wrap %s", rest[0])
		}
		return checkUsage(rest)
	}
	if len(rest) != a.nargs {
		return fmt.Errorf("%s: want %s", args[0], a.args)
	}
	return nil
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: probe [-timeout D] ACTION ARGS...")
	for _, name := range []string{"tcp", "udp", "udp-connected", "sendmmsg", "tfo", "iouring", "ping", "raw",
		"sctp", "srh", "srh-udp", "srh-cmsg", "lsrr", "daemonize", "escape-cgroup"} {
		fmt.Fprintf(os.Stderr, "  %s %s\n", name, actions[name].args)
	}
}

// perform runs the action named by args[0]; args have passed checkUsage.
func perform(args []string) *result {
	r := &result{Op: args[0]}
	err := actions[args[0]].run(args[1:], r)
	r.setErr(err)
	return r
}

// output serialises the single line a probe may print: the watchdog and the
// normal path race for it.
var output struct {
	sync.Mutex
	done bool
}

// stdoutSink prints the result line on standard output.
func stdoutSink(line []byte) error {
	_, err := os.Stdout.Write(line)
	return err
}

// emit hands r to sink as the probe's one JSON line (at most once per
// process) and returns the matching exit status.
func emit(sink func([]byte) error, r *result) int {
	output.Lock()
	defer output.Unlock()
	if output.done {
		// The watchdog already spoke and is exiting.
		select {}
	}
	output.done = true
	b, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: encoding result: %v\n", err)
		return exitFail
	}
	if err := sink(append(b, '\n')); err != nil {
		fmt.Fprintf(os.Stderr, "probe: writing result: %v\n", err)
		return exitFail
	}
	if !r.OK {
		return exitFail
	}
	return exitOK
}

// startWatchdog ends the process shortly after the deadline even if a
// syscall ignores it (a blocking io_uring_enter on an old kernel, a stuck
// write): a test must never hang on a probe.
func startWatchdog(sink func([]byte) error, op string) {
	time.AfterFunc(time.Until(deadline)+time.Second, func() {
		r := &result{Op: op, Stage: "watchdog", Timeout: true}
		r.setErr(errors.New("action did not finish in time"))
		r.Errno = "ETIMEDOUT"
		os.Exit(emit(sink, r))
	})
}
