// SPDX-License-Identifier: Apache-2.0

//go:build linux

package world_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	code, ready := needs.Main(m, "world", needs.World...)
	if ready {
		code = m.Run()
	}
	world.RemoveProbe()
	os.Exit(code)
}

// arrival bounds how long a test waits for a packet it expects.
const arrival = 2 * time.Second

// nobody runs a probe as uid/gid 65534 with no supplementary groups.
var nobody = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}

// TestAllowedPaths runs every ordinary action from the client to both
// allowed hosts and checks both the probe's view and the sniffer's.
func TestAllowedPaths(t *testing.T) {
	w := world.New(t)
	for _, host := range []netip.Addr{world.AllowedV4, world.AllowedV6} {
		tcp := w.ListenTCP(t, host)
		udp := w.ListenUDP(t, host)
		icmpEcho := uint8(8)
		if host.Is6() {
			icmpEcho = 128
		}
		for _, tc := range []struct {
			action string
			port   uint16
			proto  uint8
		}{
			{"tcp", tcp, unix.IPPROTO_TCP},
			{"udp", udp, unix.IPPROTO_UDP},
			{"udp-connected", udp, unix.IPPROTO_UDP},
			{"sendmmsg", udp, unix.IPPROTO_UDP},
			{"tfo", tcp, unix.IPPROTO_TCP},
			{"iouring", tcp, unix.IPPROTO_TCP},
			{"ping", 0, 0},
		} {
			t.Run(fmt.Sprintf("%s/%v", tc.action, host), func(t *testing.T) {
				start := time.Now()
				args := []string{tc.action, host.String()}
				want := world.All(world.Since(start), world.ToPort(host, tc.port), world.Proto(tc.proto))
				if tc.action == "ping" {
					want = world.All(world.Since(start), world.To(host), func(p world.Packet) bool {
						return (p.Proto == unix.IPPROTO_ICMP || p.Proto == unix.IPPROTO_ICMPV6) && p.ICMPType == icmpEcho
					})
				} else {
					args = append(args, fmt.Sprint(tc.port))
				}
				r := w.RunProbe(t, nil, args...)
				if !r.OK || r.ExitCode != 0 {
					t.Fatalf("probe failed: %v (exit %d)", r, r.ExitCode)
				}
				if !w.WaitArrival(want, arrival) {
					t.Errorf("sniffer recorded no %s packet to %v; it saw: %v", tc.action, host, w.Arrivals(world.Since(start)))
				}
			})
		}
	}

	// Every TCP connection and UDP datagram came from the client's address.
	for _, c := range w.Contacts() {
		if c.Remote.Addr() != world.ClientV4 && c.Remote.Addr() != world.ClientV6 {
			t.Errorf("contact from %v, want the client's address", c.Remote)
		}
	}
}

// TestMappedIPv4 checks that an IPv4-mapped IPv6 destination, used through
// an AF_INET6 socket (the case that reaches sluice's connect6 hook only),
// leaves as plain IPv4.
func TestMappedIPv4(t *testing.T) {
	w := world.New(t)
	mapped := netip.AddrFrom16(world.AllowedV4.As16()).String()
	tcp := w.ListenTCP(t, world.AllowedV4)
	udp := w.ListenUDP(t, world.AllowedV4)
	for _, args := range [][]string{
		{"tcp", mapped, fmt.Sprint(tcp)},
		{"udp", mapped, fmt.Sprint(udp)},
		{"udp-connected", mapped, fmt.Sprint(udp)},
	} {
		start := time.Now()
		if r := w.RunProbe(t, nil, args...); !r.OK {
			t.Errorf("%v: %v", args, r)
		}
		if !w.WaitArrival(world.All(world.Since(start), world.To(world.AllowedV4), world.From(world.ClientV4)), arrival) {
			t.Errorf("%v: no IPv4 packet arrived", args)
		}
	}
}

// TestFastOpenCarriesData checks that the tfo action exercises the real
// Fast Open path: once the client holds a cookie, data rides in the SYN.
func TestFastOpenCarriesData(t *testing.T) {
	w := world.New(t)
	port := w.ListenTCP(t, world.AllowedV4)
	first := w.RunProbe(t, nil, "tfo", world.AllowedV4.String(), fmt.Sprint(port))
	second := w.RunProbe(t, nil, "tfo", world.AllowedV4.String(), fmt.Sprint(port))
	if !first.OK || !second.OK {
		t.Fatalf("tfo failed: %v / %v", first, second)
	}
	if first.Sent != 0 {
		t.Errorf("first attempt sent %d bytes in the SYN without a cookie", first.Sent)
	}
	if second.Sent == 0 {
		t.Errorf("second attempt sent no data in the SYN: the Fast Open path was not exercised")
	}
}

// TestProbeAsNobody checks that the probe binary is usable by another user,
// as the confinement tests will run it.
func TestProbeAsNobody(t *testing.T) {
	w := world.New(t)
	tcp := w.ListenTCP(t, world.AllowedV4)
	udp := w.ListenUDP(t, world.AllowedV6)
	for _, args := range [][]string{
		{"tcp", world.AllowedV4.String(), fmt.Sprint(tcp)},
		{"udp", world.AllowedV6.String(), fmt.Sprint(udp)},
		{"ping", world.AllowedV4.String()},
		{"iouring", world.AllowedV4.String(), fmt.Sprint(tcp)},
	} {
		if r := w.RunProbe(t, nobody, args...); !r.OK {
			t.Errorf("as uid 65534, %v: %v", args, r)
		}
	}
	// Without CAP_NET_RAW a raw socket is refused at socket(): the kernel's
	// own answer, which confinement tests must not mistake for sluice's.
	r := w.RunProbe(t, nobody, "raw", world.AllowedV4.String())
	if r.OK || r.Stage != "socket" || r.Errno != "EPERM" {
		t.Errorf("raw as uid 65534: got %v, want EPERM at socket", r)
	}
}

// TestRawAsRoot checks that root can send ICMP through a raw socket.
func TestRawAsRoot(t *testing.T) {
	w := world.New(t)
	for _, host := range []netip.Addr{world.AllowedV4, world.AllowedV6} {
		start := time.Now()
		if r := w.RunProbe(t, nil, "raw", host.String()); !r.OK {
			t.Errorf("raw %v: %v", host, r)
		}
		if !w.WaitArrival(world.All(world.Since(start), world.To(host)), arrival) {
			t.Errorf("raw %v: nothing arrived", host)
		}
	}
}

// TestSegmentRoutingHeader shows the bypass sluice's setsockopt hook
// closes: connect() names AllowedV6, yet the SYN goes to DeniedV6 with a
// routing header. The world (seg6_enabled=0) drops it after the sniffer has
// recorded it, so the connect itself times out.
func TestSegmentRoutingHeader(t *testing.T) {
	w := world.New(t)
	port := w.ListenTCP(t, world.AllowedV6)
	r := w.RunProbe(t, nil, "-timeout", "500ms", "srh", world.AllowedV6.String(), world.DeniedV6.String(), fmt.Sprint(port))
	if r.Stage == "setsockopt" {
		t.Fatalf("the kernel refused the segment routing header: %v", r)
	}
	srh := world.All(world.To(world.DeniedV6), world.Proto(unix.IPPROTO_TCP),
		func(p world.Packet) bool { return p.RoutingHeader && p.DstPort == port })
	if !w.WaitArrival(srh, arrival) {
		t.Fatalf("no TCP packet with a routing header reached %v; saw %v", world.DeniedV6, w.Arrivals(nil))
	}
	w.AssertNothingArrived(t, world.To(world.AllowedV6), 0)
}

// TestSegmentRoutingHeaderUDP is the same steering for an unconnected UDP
// socket with the header set as a sticky option.
func TestSegmentRoutingHeaderUDP(t *testing.T) {
	w := world.New(t)
	port := w.ListenUDP(t, world.AllowedV6)
	r := w.RunProbe(t, nil, "-timeout", "500ms", "srh-udp", world.AllowedV6.String(), world.DeniedV6.String(), fmt.Sprint(port))
	if r.Stage == "setsockopt" || r.Stage == "sendto" {
		t.Fatalf("the kernel refused: %v", r)
	}
	srh := world.All(world.To(world.DeniedV6), world.Proto(unix.IPPROTO_UDP),
		func(p world.Packet) bool { return p.RoutingHeader && p.DstPort == port })
	if !w.WaitArrival(srh, arrival) {
		t.Fatalf("no UDP packet with a routing header reached %v; saw %v", world.DeniedV6, w.Arrivals(nil))
	}
}

// TestSegmentRoutingHeaderCmsg records a kernel fact: a type-4 routing
// header in an IPV6_RTHDR control message is refused by sendmsg with
// EINVAL (ip6_datagram_send_ctl accepts only type 2 there), so nothing
// leaves. If a kernel ever accepts it, the packet must be seen at DeniedV6
// and sluice needs a test (and a hook) for it: the test then fails loudly.
func TestSegmentRoutingHeaderCmsg(t *testing.T) {
	w := world.New(t)
	port := w.ListenUDP(t, world.AllowedV6)
	r := w.RunProbe(t, nil, "-timeout", "500ms", "srh-cmsg", world.AllowedV6.String(), world.DeniedV6.String(), fmt.Sprint(port))
	if r.Stage != "sendmsg" || r.Errno != "EINVAL" {
		t.Errorf("srh-cmsg: got %v, want EINVAL at sendmsg", r)
	}
	w.AssertNothingArrived(t, world.Any(world.To(world.DeniedV6), world.To(world.AllowedV6)), 200*time.Millisecond)
}

// TestLooseSourceRoute shows the IPv4 counterpart: with an LSRR option whose
// first hop is DeniedV4, a connect() to AllowedV4 sends its SYN to DeniedV4
// carrying the option. The world (accept_source_route=0, no forwarding)
// drops it after the sniffer has recorded it.
func TestLooseSourceRoute(t *testing.T) {
	w := world.New(t)
	port := w.ListenTCP(t, world.AllowedV4)
	r := w.RunProbe(t, nil, "-timeout", "500ms", "lsrr", world.AllowedV4.String(), world.DeniedV4.String(), fmt.Sprint(port))
	if r.Stage == "setsockopt" {
		t.Fatalf("the kernel refused the LSRR option: %v", r)
	}
	lsrr := world.All(world.To(world.DeniedV4), world.Proto(unix.IPPROTO_TCP),
		func(p world.Packet) bool { return p.IPOptions && p.DstPort == port })
	if !w.WaitArrival(lsrr, arrival) {
		t.Fatalf("no TCP packet with IP options reached %v; saw %v", world.DeniedV4, w.Arrivals(nil))
	}
	w.AssertNothingArrived(t, world.To(world.AllowedV4), 0)
}

// TestSCTP skips here: this kernel has no SCTP, which the probe reports as
// unsupported rather than as a failure a test could mistake for blocking.
func TestSCTP(t *testing.T) {
	w := world.New(t)
	r := w.RunProbe(t, nil, "-timeout", "500ms", "sctp", world.AllowedV4.String(), "9")
	if r.Unsupported {
		needs.Absent(t, "kernel has no SCTP: %v", r)
	}
	// SCTP exists: the INIT must have reached the world (nothing listens,
	// so the association itself is refused).
	if !w.WaitArrival(world.All(world.To(world.AllowedV4), world.Proto(unix.IPPROTO_SCTP)), arrival) {
		t.Errorf("sctp: nothing arrived; probe said %v", r)
	}
}

// TestDaemonize checks that the double-forked grandchild outlives the probe
// and reports through its file.
func TestDaemonize(t *testing.T) {
	w := world.New(t)
	port := w.ListenTCP(t, world.AllowedV4)
	// t.TempDir's parent is private to root; the grandchild runs as 65534.
	dir, err := os.MkdirTemp("", "sluice-daemonize-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "result.json")
	start := time.Now()
	r := w.RunProbe(t, nobody, "daemonize", out, "tcp", world.AllowedV4.String(), fmt.Sprint(port))
	if !r.OK || r.PID == 0 {
		t.Fatalf("daemonize: %v", r)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("daemonize took %v; the probe should return at once", d)
	}
	var got world.ProbeResult
	end := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(out)
		if err == nil {
			if got, err = world.ParseProbeResult(b); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no result file after 5s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !got.OK || got.Op != "tcp" {
		t.Errorf("grandchild: %v", got)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("result file: %v, %v; want mode 0666", fi.Mode(), err)
	}
	if !w.WaitArrival(world.ToPort(world.AllowedV4, port), arrival) {
		t.Error("the grandchild's connection was not recorded")
	}
}

// TestEscapeCgroup checks the escape-cgroup action as an unprivileged user
// started in a child cgroup: every attempt to move up the hierarchy, up to
// the mount's root, is refused and recorded, and the wrapped action still
// runs.
func TestEscapeCgroup(t *testing.T) {
	w := world.New(t)
	port := w.ListenUDP(t, world.AllowedV4)
	cg, fd := childCgroup(t)
	attr := &syscall.SysProcAttr{
		Credential:  nobody.Credential,
		UseCgroupFD: true,
		CgroupFD:    fd,
	}
	r := w.RunProbe(t, attr, "escape-cgroup", "udp", world.AllowedV4.String(), fmt.Sprint(port))
	if !r.OK || r.Action == nil || !r.Action.OK {
		t.Fatalf("escape-cgroup: %v", r)
	}
	if r.CgroupFrom != cg || r.CgroupTo != cg {
		t.Errorf("cgroup went from %s to %s, want %s throughout", r.CgroupFrom, r.CgroupTo, cg)
	}
	if len(r.Escapes) == 0 {
		t.Errorf("no escape attempts recorded")
	}
	for _, m := range r.Escapes {
		if m.OK || m.Errno == "" {
			t.Errorf("uid 65534 writing %s: ok=%v errno=%q, want a refusal", m.Path, m.OK, m.Errno)
		}
	}
}

// childCgroup creates a cgroup just below the cgroup2 mount's root, removed
// at cleanup, and returns its path (as /proc/PID/cgroup shows it) and an
// open directory fd for CLONE_INTO_CGROUP.
func childCgroup(t *testing.T) (string, int) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var mnt string
	for line := range strings.SplitSeq(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && strings.HasPrefix(post, "cgroup2 ") && len(f) >= 5 && f[3] == "/" {
			mnt = f[4]
			break
		}
	}
	if mnt == "" {
		needs.Skip(t, "no cgroup2 mount")
	}
	name := fmt.Sprintf("sluice-world-test-%d", os.Getpid())
	dir := filepath.Join(mnt, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("creating cgroup: %v", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		t.Fatalf("opening cgroup: %v", err)
	}
	t.Cleanup(func() {
		unix.Close(fd)
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing cgroup: %v", err)
		}
	})
	return "/" + name, fd
}

// TestUsage checks the probe's usage contract: exit status 2.
func TestUsage(t *testing.T) {
	probe := world.BuildProbe(t)
	for _, args := range [][]string{{}, {"nonsense"}, {"tcp", "127.0.0.1"}, {"daemonize", "/nonexistent"}} {
		err := exec.Command(probe, args...).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("probe %v: %v, want exit status 2", args, err)
		}
	}
}

// TestCleanup checks that a world leaves no namespace behind, and that the
// sniffer and the namespace helpers behave.
func TestCleanup(t *testing.T) {
	var client, wld string
	t.Run("world", func(t *testing.T) {
		w := world.New(t)
		client, wld = w.ClientPath(), w.WorldPath()
		for _, p := range []string{client, wld} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("namespace file: %v", err)
			}
		}

		// The client's only way out is the veth: check its routes.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := w.ClientCmd(ctx, "ip", "route", "show", "default").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "via 198.51.100.1") {
			t.Errorf("client IPv4 default route: %q, %v", out, err)
		}
		out, err = w.ClientCmd(ctx, "sysctl", "-n", "net.ipv4.ping_group_range").CombinedOutput()
		if err != nil || strings.Join(strings.Fields(string(out)), " ") != "0 2147483647" {
			t.Errorf("client ping_group_range: %q, %v", out, err)
		}

		// Entering a namespace must never leak into the caller's thread.
		host, err := os.Readlink("/proc/thread-self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			if err := w.InClient(func() error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		for range 20 {
			if now, _ := os.Readlink("/proc/thread-self/ns/net"); now != host {
				t.Fatalf("thread in namespace %s, want %s", now, host)
			}
			time.Sleep(time.Millisecond)
		}

		// Quiet world: nothing should arrive without traffic.
		w.AssertNothingArrived(t, world.Any(world.To(world.AllowedV4), world.To(world.DeniedV4),
			world.To(world.AllowedV6), world.To(world.DeniedV6)), 100*time.Millisecond)
	})
	if client == "" {
		needs.Skip(t, "world not created")
	}
	for _, p := range []string{client, wld} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists after cleanup: %v", p, err)
		}
	}
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	for _, p := range []string{client, wld} {
		if strings.Contains(string(out), filepath.Base(p)) {
			t.Errorf("ip netns list still shows %s:\n%s", filepath.Base(p), out)
		}
	}
}

// TestProbeResultJSON pins the JSON contract between the probe and tests.
func TestProbeResultJSON(t *testing.T) {
	r, err := world.ParseProbeResult([]byte(`{"op":"tcp","ok":false,"errno":"EPERM","error":"connect: operation not permitted","stage":"connect"}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Op != "tcp" || r.OK || r.Errno != "EPERM" || r.Stage != "connect" {
		t.Errorf("parsed %+v", r)
	}
	if _, err := world.ParseProbeResult(nil); err == nil {
		t.Error("empty output parsed without error")
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(r.Line), &v); err != nil {
		t.Error(err)
	}
}
