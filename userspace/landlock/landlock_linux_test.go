// SPDX-License-Identifier: Apache-2.0

package landlock

// The integration tests run the real thing: a helper binary (internal/
// testshim, standing in for `sluice __confine`) calls Exec as uid 65534 in
// the client namespace of a test world (tests/world), then executes the
// probe (tests/probe), which tries one network action. A containment case
// passes only when the world's sniffer recorded nothing towards the target,
// and each has a positive twin: the same action unconfined, by the same
// user, reaches the world. Without root the world skips the test; without
// Landlock ABI 4 the tests skip with the reason.

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

const (
	settle     = 300 * time.Millisecond // for packets in flight before asserting silence
	arrival    = 2 * time.Second        // for a packet the test expects
	runTimeout = 30 * time.Second       // one confined run; the probe bounds itself far below
	shimPkg    = "github.com/sluice-dev/sluice/userspace/landlock/internal/testshim"
)

// nobody runs commands as the unprivileged user the confinement is for;
// a nil Groups drops root's supplementary groups.
var nobody = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}

func TestMain(m *testing.M) {
	code, ready := needs.Main(m, "landlock", needs.World...)
	if ready {
		code = m.Run()
	}
	world.RemoveProbe()
	if shimBuild.dir != "" {
		os.RemoveAll(shimBuild.dir)
	}
	os.Exit(code)
}

// shimBuild holds the one build of the shim per test binary.
var shimBuild struct {
	once      sync.Once
	dir, path string
	err       error
}

// buildShim builds internal/testshim next to the probe, in a directory
// uid 65534 can reach (the probe's base directory is chosen for that).
func buildShim(t *testing.T) string {
	t.Helper()
	probe := world.BuildProbe(t)
	shimBuild.once.Do(func() {
		dir, err := os.MkdirTemp(filepath.Dir(filepath.Dir(probe)), "sluice-testshim-")
		if err != nil {
			shimBuild.err = err
			return
		}
		shimBuild.dir = dir
		if err := os.Chmod(dir, 0o755); err != nil {
			shimBuild.err = err
			return
		}
		path := filepath.Join(dir, "testshim")
		cmd := exec.Command("go", "build", "-o", path, shimPkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			shimBuild.err = &buildError{err, string(out)}
			return
		}
		shimBuild.path = path
	})
	if shimBuild.err != nil {
		t.Fatalf("building the test shim: %v", shimBuild.err)
	}
	return shimBuild.path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// requireLandlock skips the test when this kernel cannot confine.
func requireLandlock(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		// Landlock mode is sluice's: CI must exercise it.
		needs.Skip(t, "landlock tier unavailable here (boot with lsm=...,landlock): %v", err)
	}
}

// newWorld builds a test world and the binaries the tests run.
func newWorld(t *testing.T) (*world.World, string, string) {
	t.Helper()
	w := world.New(t) // skips when not root
	requireLandlock(t)
	return w, buildShim(t), world.BuildProbe(t)
}

// run starts name with args as uid 65534 in the client namespace and
// returns the JSON line it printed. Any address among args must be
// loopback or a test range.
func run(t *testing.T, w *world.World, name string, args ...string) world.ProbeResult {
	t.Helper()
	for _, a := range args {
		if ip, err := netip.ParseAddr(a); err == nil && !world.Safe(ip) {
			t.Fatalf("refusing to send anything towards %v", ip)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = nobody
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := w.StartInClient(cmd); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	waitErr := cmd.Wait()
	r, err := world.ParseProbeResult([]byte(stdout.String()))
	if err != nil {
		t.Fatalf("%s %q: %v (wait: %v, stderr: %q)", filepath.Base(name), args, err, waitErr, stderr.String())
	}
	r.ExitCode, r.Stderr = cmd.ProcessState.ExitCode(), stderr.String()
	t.Logf("%s %s -> %s", filepath.Base(name), strings.Join(args, " "), r.Line)
	return r
}

// confined runs the probe with args under Exec allowing ports.
func confined(t *testing.T, w *world.World, shim string, ports []uint16, cmd ...string) world.ProbeResult {
	t.Helper()
	args := append([]string{"confine"}, Rules{ConnectPorts: ports}.Args()...)
	return run(t, w, shim, append(append(args, "--"), cmd...)...)
}

func port(p uint16) string { return strconv.Itoa(int(p)) }

// wantRefused fails unless r failed at stage with errno.
func wantRefused(t *testing.T, r world.ProbeResult, stage, errno string) {
	t.Helper()
	if r.OK || r.Stage != stage || r.Errno != errno {
		t.Errorf("got %s; want a refusal with %s at %s", r, errno, stage)
	}
}

// wantGreeting fails unless r succeeded with the world servers' greeting.
func wantGreeting(t *testing.T, r world.ProbeResult) {
	t.Helper()
	if !r.OK || r.Reply != world.Greeting {
		t.Errorf("got %s; want success with reply %q", r, world.Greeting)
	}
}

// wantArrived fails unless a packet f selects reached the world.
func wantArrived(t *testing.T, w *world.World, f world.Filter, what string) {
	t.Helper()
	if !w.WaitArrival(f, arrival) {
		t.Errorf("%s: nothing arrived in the world", what)
	}
}

// proxyStandIn listens on loopback in the client namespace, like sluice's
// proxy, and relays each connection to upstream (dialled from the client
// namespace, unconfined, as the proxy would). It returns the port.
func proxyStandIn(t *testing.T, w *world.World, ip netip.Addr, upstream netip.AddrPort) uint16 {
	t.Helper()
	network := "tcp6"
	if ip.Is4() {
		network = "tcp4"
	}
	var ln net.Listener
	if err := w.InClient(func() (err error) {
		ln, err = net.Listen(network, netip.AddrPortFrom(ip, 0).String())
		return err
	}); err != nil {
		t.Fatalf("loopback listener: %v", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by cleanup
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(arrival))
				var up net.Conn
				if err := w.InClient(func() (err error) {
					up, err = net.DialTimeout("tcp", upstream.String(), arrival)
					return err
				}); err != nil {
					t.Errorf("stand-in dialling %v: %v", upstream, err)
					return
				}
				defer up.Close()
				_ = up.SetDeadline(time.Now().Add(arrival))
				_, _ = io.Copy(c, up)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// TestTCP: connect reaches the allowed loopback ports (a proxy stand-in that
// relays to the allowed host) and nothing else.
func TestTCP(t *testing.T) {
	w, shim, probe := newWorld(t)
	allowed := w.ListenTCP(t, world.AllowedV4)
	denied := w.ListenTCP(t, world.DeniedV4)
	denied6 := w.ListenTCP(t, world.DeniedV6)
	upstream := netip.AddrPortFrom(world.AllowedV4, allowed)
	lo := proxyStandIn(t, w, netip.MustParseAddr("127.0.0.1"), upstream)
	lo6 := proxyStandIn(t, w, netip.IPv6Loopback(), upstream)
	ports := []uint16{lo, lo6}

	// Positive: through the loopback stand-in to the allowed host.
	wantGreeting(t, confined(t, w, shim, ports, probe, "tcp", "127.0.0.1", port(lo)))
	wantGreeting(t, confined(t, w, shim, ports, probe, "tcp", "::1", port(lo6)))
	wantArrived(t, w, world.To(world.AllowedV4), "through the stand-in")

	// Directly to the world, on ports that are not allowed.
	wantRefused(t, confined(t, w, shim, ports, probe, "tcp", world.DeniedV4.String(), port(denied)), "connect", "EACCES")
	wantRefused(t, confined(t, w, shim, ports, probe, "tcp", world.DeniedV6.String(), port(denied6)), "connect", "EACCES")
	wantRefused(t, confined(t, w, shim, ports, probe, "tcp", "::ffff:"+world.DeniedV4.String(), port(denied)), "connect", "EACCES")
	// Loopback is not open as a whole: only the listed ports.
	wantRefused(t, confined(t, w, shim, []uint16{lo6}, probe, "tcp", "127.0.0.1", port(lo)), "connect", "EACCES")
	w.AssertNothingArrived(t, world.Any(world.To(world.DeniedV4), world.To(world.DeniedV6)), settle)

	// Twin: the same user, unconfined, reaches the world.
	wantGreeting(t, run(t, w, probe, "tcp", world.DeniedV4.String(), port(denied)))
	wantArrived(t, w, world.To(world.DeniedV4), "unconfined twin")
}

// TestUDP: no UDP socket at all, so no datagram and no DNS of one's own.
func TestUDP(t *testing.T) {
	w, shim, probe := newWorld(t)
	p := w.ListenUDP(t, world.DeniedV4)
	p6 := w.ListenUDP(t, world.DeniedV6)
	for _, op := range []string{"udp", "udp-connected", "sendmmsg"} {
		wantRefused(t, confined(t, w, shim, []uint16{p}, probe, op, world.DeniedV4.String(), port(p)), "socket", "EPERM")
		wantRefused(t, confined(t, w, shim, []uint16{p6}, probe, op, world.DeniedV6.String(), port(p6)), "socket", "EPERM")
	}
	wantRefused(t, confined(t, w, shim, nil, probe, "dns", world.WorldV4.String(), "53", "example.test.", "A", "udp"), "socket", "EPERM")
	w.AssertNothingArrived(t, world.Any(world.Proto(17), world.To(world.DeniedV4), world.To(world.DeniedV6)), settle)

	r := run(t, w, probe, "udp", world.DeniedV4.String(), port(p))
	if !r.OK {
		t.Errorf("unconfined twin: %s", r)
	}
	wantArrived(t, w, world.To(world.DeniedV4), "unconfined twin")
}

// TestICMP: no ping sockets (the client namespace lets every group use
// them, so the twin works unprivileged).
func TestICMP(t *testing.T) {
	w, shim, probe := newWorld(t)
	wantRefused(t, confined(t, w, shim, nil, probe, "ping", world.DeniedV4.String()), "socket", "EPERM")
	wantRefused(t, confined(t, w, shim, nil, probe, "ping", world.DeniedV6.String()), "socket", "EPERM")
	w.AssertNothingArrived(t, world.Any(world.To(world.DeniedV4), world.To(world.DeniedV6)), settle)

	if r := run(t, w, probe, "ping", world.DeniedV4.String()); !r.OK {
		t.Errorf("unconfined twin: %s", r)
	}
	wantArrived(t, w, world.To(world.DeniedV4), "unconfined twin")
}

// TestFastOpen: sendto(MSG_FASTOPEN) connects without connect(2), where
// Landlock does not look; the filter answers EOPNOTSUPP.
func TestFastOpen(t *testing.T) {
	w, shim, probe := newWorld(t)
	p := w.ListenTCP(t, world.DeniedV4)
	// EOPNOTSUPP and ENOTSUP are one errno on Linux; x/sys/unix names it
	// ENOTSUP.
	wantRefused(t, confined(t, w, shim, nil, probe, "tfo", world.DeniedV4.String(), port(p)), "sendto", "ENOTSUP")
	w.AssertNothingArrived(t, world.To(world.DeniedV4), settle)

	wantGreeting(t, run(t, w, probe, "tfo", world.DeniedV4.String(), port(p)))
	wantArrived(t, w, world.To(world.DeniedV4), "unconfined twin")
}

// TestIOURing: no io_uring, which could create sockets and connect on its
// own.
func TestIOURing(t *testing.T) {
	w, shim, probe := newWorld(t)
	p := w.ListenTCP(t, world.DeniedV4)
	wantRefused(t, confined(t, w, shim, nil, probe, "iouring", world.DeniedV4.String(), port(p)), "io_uring_setup", "EPERM")
	w.AssertNothingArrived(t, world.To(world.DeniedV4), settle)

	if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil && strings.TrimSpace(string(b)) != "0" {
		needs.Absent(t, "kernel.io_uring_disabled=%s: no unprivileged twin possible", strings.TrimSpace(string(b)))
	}
	wantGreeting(t, run(t, w, probe, "iouring", world.DeniedV4.String(), port(p)))
	wantArrived(t, w, world.To(world.DeniedV4), "unconfined twin")
}

// TestMPTCP: MPTCP sockets are SOCK_STREAM but not TCP, so Landlock lets
// them connect anywhere; the filter refuses to create them.
func TestMPTCP(t *testing.T) {
	w, shim, _ := newWorld(t)
	p := w.ListenTCP(t, world.DeniedV4)
	args := []string{"confine", "--", shim, "mptcp", world.DeniedV4.String(), port(p)}
	wantRefused(t, run(t, w, shim, args...), "socket", "EPERM")
	w.AssertNothingArrived(t, world.To(world.DeniedV4), settle)

	r := run(t, w, shim, "mptcp", world.DeniedV4.String(), port(p))
	if r.Stage == "socket" && r.Errno == "EPROTONOSUPPORT" {
		needs.Absent(t, "kernel without MPTCP: no unconfined twin")
	}
	wantGreeting(t, r)
	wantArrived(t, w, world.To(world.DeniedV4), "unconfined twin")
}

// TestDescendants: a double-forked, setsid grandchild is still confined.
func TestDescendants(t *testing.T) {
	w, shim, probe := newWorld(t)
	p := w.ListenTCP(t, world.DeniedV4)
	dir, err := os.MkdirTemp(filepath.Dir(shim), "out-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "grandchild.json")

	r := confined(t, w, shim, nil, probe, "daemonize", out, "tcp", world.DeniedV4.String(), port(p))
	if !r.OK {
		t.Fatalf("daemonize: %s", r)
	}
	var line []byte
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if line, err = os.ReadFile(out); err == nil && strings.HasSuffix(string(line), "\n") {
			break
		}
	}
	g, err := world.ParseProbeResult(line)
	if err != nil {
		t.Fatalf("grandchild's result: %v", err)
	}
	t.Logf("grandchild -> %s", g.Line)
	wantRefused(t, g, "connect", "EACCES")
	w.AssertNothingArrived(t, world.To(world.DeniedV4), settle)
}

// TestLimitPortsNotAddresses keeps the package documentation honest:
// Landlock filters ports, so any host listening on an allowed port number is
// reachable directly.
func TestLimitPortsNotAddresses(t *testing.T) {
	w, shim, probe := newWorld(t)
	p := w.ListenTCP(t, world.DeniedV4)
	wantGreeting(t, confined(t, w, shim, []uint16{p}, probe, "tcp", world.DeniedV4.String(), port(p)))
	wantArrived(t, w, world.To(world.DeniedV4), "allowed port on a world host")
}

func TestAvailable(t *testing.T) {
	abi, err := ABI()
	if err != nil {
		needs.Skip(t, "no Landlock (boot with lsm=...,landlock): %v", err)
	}
	t.Logf("Landlock ABI %d", abi)
	err = Available()
	if abi >= minABI && err != nil {
		t.Errorf("ABI %d but Available: %v", abi, err)
	}
	if abi < minABI && err == nil {
		t.Errorf("ABI %d but Available says yes", abi)
	}
}

// TestExecRefusesBeforeConfining covers the errors Exec finds before it
// touches the process (any later one would confine the test binary).
func TestExecRefusesBeforeConfining(t *testing.T) {
	cases := []struct {
		name  string
		rules Rules
		argv  []string
		want  string
	}{
		{"port 0", Rules{ConnectPorts: []uint16{0}}, []string{"true"}, "port 0"},
		{"no command", Rules{}, nil, "no command"},
		{"missing command", Rules{}, []string{"sluice-no-such-command"}, "not found"},
		{"missing path", Rules{}, []string{"/nonexistent/sluice"}, "no such file"},
	}
	for _, tc := range cases {
		err := Exec(tc.rules, tc.argv, []string{"PATH=/usr/bin:/bin"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
