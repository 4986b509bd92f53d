// SPDX-License-Identifier: Apache-2.0

//go:build linux

package dnse2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// The attacks on the kernel's TLS name check (bpf/sni.h) through the real
// datapath: `sluice run --allow cdn.test`, the program connecting to port
// 443 of the CDN address it learned for cdn.test and sending a real
// crypto/tls ClientHello for evil.test, which the same address serves, in
// every way of putting a first flight on a socket that the prototype's
// tests tried (docs/sniprobe.md, "Bypasses tried"). Each runs unconfined
// first: the CDN must record evil.test that way, or the case proves
// nothing. Confined, the CDN must record no ClientHello for evil.test and
// the wire no byte of it; the allowed name, sent the same way, works where
// the design says it does.

// sniWay is one way of sending the first flight (the probe's tls-attack
// HOW).
type sniWay struct {
	name, how string
	// allowedWorks: cdn.test sent this way is judged and answered.
	allowedWorks bool
	// line is the end of the refusal's explanation sluice prints.
	line string
}

// refusedSNI is the explanation of a refused ClientHello for evil.test.
var refusedSNI = "(TLS SNI evil.test): " + allowedFor("cdn.test")

var sniWays = []sniWay{
	{"Plain", "plain", true, refusedSNI},
	{"OneBytePerWrite", "bytes", true, refusedSNI},
	{"MSGMoreThenRest", "more", true, refusedSNI},
	// The urgent byte is out of the server's stream but in the one sk_msg
	// judges, which then does not start with a TLS record: refused
	// whatever the name (fail closed), so cdn.test does not work this way.
	{"MSGOOBByteFirst", "oob", false, "(no host name): the first bytes are neither a TLS ClientHello nor an HTTP/1 request; " + allowedFor("cdn.test")},
	{"MSGZeroCopy", "zerocopy", true, refusedSNI},
	{"Sendfile", "sendfile", true, refusedSNI},
	{"SpliceFromPipe", "splice", true, refusedSNI},
	// An allowed first flight (judged, the socket verified and out of the
	// sockhash), then the same socket disconnected and connected again:
	// its second first flight is judged afresh.
	{"ReconnectAfterAllowed", "reconnect:cdn.test", true, refusedSNI},
}

// attack runs the probe's tls-attack confined (flags non-nil) or
// unconfined (nil), with the probe's -timeout.
func (f *fixture) attack(t *testing.T, flags []string, timeout, target, fam, sni, how string) (world.ProbeResult, string) {
	t.Helper()
	args := []string{"-timeout", timeout, "tls-attack", target, fam, "443", sni, how}
	if flags == nil {
		return f.unconfined(t, args...), ""
	}
	return f.probe(t, flags, args...)
}

// quiet waits for the CDN address's connections of an earlier run to finish
// closing and returns the time from which the wire is judged.
func (f *fixture) quiet(t *testing.T, addr netip.Addr) time.Time {
	t.Helper()
	if !f.w.WaitQuiet(world.ToPort(addr, 443), 200*time.Millisecond, 5*time.Second) {
		t.Fatalf("the connections to %v did not settle", netip.AddrPortFrom(addr, 443))
	}
	return time.Now()
}

// noWire fails the test if, since t0, a TCP segment with payload from the
// client reached the CDN's port 443 (any: the refused connections send
// none) or one naming evil.test (anyPayload false: an allowed flight came
// before on the same address).
func (f *fixture) noWire(t *testing.T, addr netip.Addr, t0 time.Time, anyPayload bool) {
	t.Helper()
	f.w.AssertNothingArrived(t, wire(addr, t0, anyPayload), 300*time.Millisecond)
}

// wire selects the client's TCP segments to addr's port 443 since t0 that
// carry payload (anyPayload) or the name evil.test.
func wire(addr netip.Addr, t0 time.Time, anyPayload bool) world.Filter {
	return world.All(world.ToPort(addr, 443), world.Since(t0), func(p world.Packet) bool {
		return p.Payload != "" && (anyPayload || strings.Contains(p.Payload, "evil.test"))
	})
}

func TestSNIAttackFirstFlight(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4, cdnV6)
	allow := []string{"--allow", "cdn.test"}
	for _, way := range sniWays {
		for _, c := range cdnFamilies {
			t.Run(fmt.Sprintf("%s/IPv%s", way.name, c.fam), func(t *testing.T) {
				cdn = f.w.ServeCDNReset(cdn)
				tw := f.quiet(t, c.addr)
				r, _ := f.attack(t, nil, "5s", c.addr.String(), c.fam, "evil.test", way.how)
				if !r.OK || !strings.Contains(r.Reply, "200") || !cdn.Saw("evil.test") {
					t.Fatalf("unconfined: %s; the CDN recorded SNIs %q: the way does not deliver evil.test, so the case proves nothing", r, cdn.SNIs())
				}
				// The sniffer sees the twin's first flight, so the wire's
				// silence below means something.
				if len(f.w.Arrivals(wire(c.addr, tw, way.how != "plain"))) == 0 {
					t.Fatalf("unconfined: the sniffer saw no first flight on the wire")
				}
				cdn = f.w.ServeCDNReset(cdn)
				t0 := f.quiet(t, c.addr)
				r, stderr := f.attack(t, allow, "5s", "cdn.test", c.fam, "evil.test", way.how)
				if r.OK {
					t.Errorf("confined: the handshake with SNI evil.test went through: %s", r)
				}
				if r.Errno != "EACCES" {
					t.Errorf("confined: %s, want the ClientHello's send refused (EACCES)", r)
				}
				line := fmt.Sprintf("-> %s %s", netip.AddrPortFrom(c.addr, 443), way.line)
				if !strings.Contains(stderr, "refused probe[") || !strings.Contains(stderr, line) {
					t.Errorf("confined: no explained refusal (%q) in:\n%s", line, stderr)
				}
				if cdn.Saw("evil.test") {
					t.Errorf("LEAK: the CDN recorded evil.test from the confined program: SNIs %q, Hosts %q", cdn.SNIs(), cdn.Hosts())
				}
				f.noWire(t, c.addr, t0, !strings.HasPrefix(way.how, "reconnect:"))
				cdn = f.w.ServeCDNReset(cdn)
				r, stderr = f.attack(t, allow, "5s", "cdn.test", c.fam, "cdn.test", way.how)
				switch {
				case way.allowedWorks && (!r.OK || !strings.Contains(r.Reply, "200") || !cdn.Saw("cdn.test")):
					t.Errorf("confined, cdn.test the same way: %s; the CDN recorded %q", r, cdn.SNIs())
				case !way.allowedWorks && (r.OK || cdn.Saw("cdn.test") || !strings.Contains(stderr, way.line)):
					t.Errorf("confined, cdn.test the same way: %s; the CDN recorded %q; want it refused (%q) in:\n%s", r, cdn.SNIs(), way.line, stderr)
				}
			})
		}
	}
}

// TestSNIAttackOOBLastByte: the ClientHello for the allowed name, its
// server_name extension last, in one send with MSG_OOB, then one byte
// "x". sk_msg judges the record it was given (SNI cdn.test, allowed); a
// server without SO_OOBINLINE skips the urgent byte, the record's last,
// and reads "x" in its place: SNI cdn.tesx, a name never allowed. The
// egress program drops a marked socket's urgent segments, so the server
// reads nothing at all (the connection stalls until the probe gives up).
func TestSNIAttackOOBLastByte(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4, cdnV6)
	for _, c := range cdnFamilies {
		t.Run("IPv"+c.fam, func(t *testing.T) {
			cdn = f.w.ServeCDNReset(cdn)
			r, _ := f.attack(t, nil, "4s", c.addr.String(), c.fam, "cdn.test", "oob-last")
			if !cdn.Saw("cdn.tesx") {
				t.Fatalf("unconfined: %s; the CDN recorded %q, not the altered name cdn.tesx", r, cdn.SNIs())
			}
			cdn = f.w.ServeCDNReset(cdn)
			t0 := f.quiet(t, c.addr)
			r, _ = f.attack(t, []string{"--allow", "cdn.test"}, "4s", "cdn.test", c.fam, "cdn.test", "oob-last")
			if n := len(cdn.SNIs()); n != 0 {
				t.Errorf("LEAK: the CDN recorded %q from the confined program (%s): it read another SNI than the one judged", cdn.SNIs(), r)
			}
			f.noWire(t, c.addr, t0, true)
		})
	}
}

// TestSNIAttackIOURingSend: IORING_OP_SEND puts the first flight on the
// socket from io_uring's own context. In a session io_uring_setup is
// refused (the seccomp filter: io_uring could also open sockets unseen),
// so the attack cannot begin, for any name; the prototype showed sk_msg
// judging such a send (docs/sniprobe.md).
func TestSNIAttackIOURingSend(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4, cdnV6)
	for _, c := range cdnFamilies {
		t.Run("IPv"+c.fam, func(t *testing.T) {
			cdn = f.w.ServeCDNReset(cdn)
			r, _ := f.attack(t, nil, "5s", c.addr.String(), c.fam, "evil.test", "uring")
			if !r.OK || !cdn.Saw("evil.test") {
				t.Fatalf("unconfined: %s; the CDN recorded %q", r, cdn.SNIs())
			}
			cdn = f.w.ServeCDNReset(cdn)
			t0 := f.quiet(t, c.addr)
			for _, sni := range []string{"evil.test", "cdn.test"} {
				r, _ := f.attack(t, []string{"--allow", "cdn.test"}, "5s", "cdn.test", c.fam, sni, "uring")
				if r.OK || r.Errno != "EPERM" || r.Stage != "io_uring_setup" {
					t.Errorf("confined, %s: %s, want io_uring_setup refused (EPERM)", sni, r)
				}
			}
			if n := len(cdn.SNIs()); n != 0 {
				t.Errorf("the CDN recorded %q from the confined program", cdn.SNIs())
			}
			f.noWire(t, c.addr, t0, true)
		})
	}
}

// TestSNIAttackFastOpen: sendto(MSG_FASTOPEN) puts the first flight in the
// SYN, where sk_msg never sees it: the connect is refused (EPERM), before
// the SYN. The twin shows the CDN (TFO on its listeners) taking the
// ClientHello from the SYN once the client namespace holds its cookie.
func TestSNIAttackFastOpen(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4, cdnV6)
	allow := []string{"--allow", "cdn.test"}
	for _, c := range cdnFamilies {
		t.Run("IPv"+c.fam, func(t *testing.T) {
			f.fastOpenTwin(t, cdn, c.addr, c.fam, "fastopen")
			cdn = f.w.ServeCDNReset(cdn)
			t0 := f.quiet(t, c.addr)
			for _, sni := range []string{"evil.test", "cdn.test"} {
				// Refused whatever the name: the SYN's data would pass
				// unjudged.
				r, stderr := f.attack(t, allow, "5s", "cdn.test", c.fam, sni, "fastopen")
				if r.OK || r.Errno != "EPERM" || r.Stage != "sendto" || !strings.Contains(stderr, "TCP Fast Open would send data before the connection's name is checked") {
					t.Errorf("confined, %s: %s, want sendto(MSG_FASTOPEN) refused (EPERM) and explained in:\n%s", sni, r, stderr)
				}
			}
			if n := len(cdn.SNIs()); n != 0 {
				t.Errorf("the CDN recorded %q from the confined program", cdn.SNIs())
			}
			// Not even a SYN: the connect was refused before it.
			f.w.AssertNothingArrived(t, world.All(world.ToPort(c.addr, 443), world.Since(t0)), 300*time.Millisecond)
		})
	}
}

// fastOpenTwin runs how unconfined until the CDN acknowledged a
// ClientHello for evil.test in the SYN (the first run fetches the cookie).
func (f *fixture) fastOpenTwin(t *testing.T, cdn *world.CDN, addr netip.Addr, fam, how string) {
	t.Helper()
	for i := 0; i < 3; i++ {
		cdn = f.w.ServeCDNReset(cdn)
		r, _ := f.attack(t, nil, "5s", addr.String(), fam, "evil.test", how)
		if !r.OK || !cdn.Saw("evil.test") {
			t.Fatalf("unconfined %s: %s; the CDN recorded %q", how, r, cdn.SNIs())
		}
		if r.Note == "syn-data" {
			return
		}
	}
	t.Fatalf("unconfined %s: the CDN never took data in the SYN, so the case proves nothing", how)
}

// TestSNIAttackFastOpenConnect: TCP_FASTOPEN_CONNECT makes connect return
// at once and the first write send the SYN with the data; it comes before
// connect, so it is refused at setsockopt in a session with a name check.
func TestSNIAttackFastOpenConnect(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4, cdnV6)
	allow := []string{"--allow", "cdn.test"}
	for _, c := range cdnFamilies {
		t.Run("IPv"+c.fam, func(t *testing.T) {
			f.fastOpenTwin(t, cdn, c.addr, c.fam, "fastopen-connect")
			cdn = f.w.ServeCDNReset(cdn)
			t0 := f.quiet(t, c.addr)
			for _, sni := range []string{"evil.test", "cdn.test"} {
				r, _ := f.attack(t, allow, "5s", "cdn.test", c.fam, sni, "fastopen-connect")
				if r.OK || r.Errno != "EPERM" || r.Stage != "setsockopt" {
					t.Errorf("confined, %s: %s, want TCP_FASTOPEN_CONNECT refused (EPERM)", sni, r)
				}
			}
			if n := len(cdn.SNIs()); n != 0 {
				t.Errorf("the CDN recorded %q from the confined program", cdn.SNIs())
			}
			f.w.AssertNothingArrived(t, world.All(world.ToPort(c.addr, 443), world.Since(t0)), 300*time.Millisecond)
		})
	}
}

// TestSNIAttackKTLS: kernel TLS (TCP_ULP "tls") on a socket not yet
// verified would put other bytes on the wire than sk_msg read (its
// ciphertext, under a key the program chose): refused at setsockopt.
func TestSNIAttackKTLS(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4, cdnV6)
	allow := []string{"--allow", "cdn.test"}
	for _, c := range cdnFamilies {
		t.Run("IPv"+c.fam, func(t *testing.T) {
			r, _ := f.attack(t, nil, "5s", c.addr.String(), c.fam, "evil.test", "ktls")
			switch {
			case r.Errno == "ENOENT" && r.Stage == "setsockopt":
				// Without a tls ULP no twin can show the wire side; the
				// refusal below is still sluice's, not the kernel's ENOENT.
				t.Logf("this kernel has no kTLS (TCP_ULP \"tls\": ENOENT unconfined): only the confined refusal is asserted")
			case !r.OK || !cdn.Saw("evil.test"):
				t.Fatalf("unconfined: %s; the CDN recorded %q", r, cdn.SNIs())
			}
			cdn = f.w.ServeCDNReset(cdn)
			t0 := f.quiet(t, c.addr)
			for _, sni := range []string{"evil.test", "cdn.test"} {
				r, _ := f.attack(t, allow, "5s", "cdn.test", c.fam, sni, "ktls")
				if r.OK || r.Errno != "EPERM" || r.Stage != "setsockopt" {
					t.Errorf("confined, %s: %s, want TCP_ULP refused (EPERM) before the first flight", sni, r)
				}
			}
			if n := len(cdn.SNIs()); n != 0 {
				t.Errorf("the CDN recorded %q from the confined program", cdn.SNIs())
			}
			f.noWire(t, c.addr, t0, true)
		})
	}
}

// dropSYNs makes the world drop SYNs to port 443 for d (the client's
// connect retransmits its SYN a second later), so that a send can enter
// the kernel's TCP sendmsg while the connection is still being set up.
func (f *fixture) dropSYNs(t *testing.T, d time.Duration) {
	t.Helper()
	rule := func(op string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := f.w.WorldCmd(ctx, "iptables", "-w", op, "INPUT", "-p", "tcp", "--dport", "443", "--syn", "-j", "DROP").CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s in the world: %w: %s", op, err, out)
		}
		return nil
	}
	if err := rule("-I"); err != nil {
		t.Fatal(err)
	}
	removed := make(chan error, 1)
	time.AfterFunc(d, func() { removed <- rule("-D") })
	t.Cleanup(func() {
		if err := <-removed; err != nil {
			t.Error(err)
		}
	})
}

// TestSNIAttackSendDuringConnect: a blocking send from a second thread
// while the connect is in progress enters tcp_sendmsg before the socket
// joins the sockhash, so sk_msg never sees it. The egress backstop drops
// its segments, and a pending socket's TCP_USER_TIMEOUT is lowered to 10 s,
// so the connection cannot hold them for minutes: the program fails (here
// first by the CDN giving up on the handshake after its 2 s I/O timeout,
// else by the user timeout), never hangs, and no byte of it reaches the
// CDN. IPv4 only: the path is the same for IPv6, and each run waits.
func TestSNIAttackSendDuringConnect(t *testing.T) {
	if _, err := exec.LookPath("iptables"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("needs iptables (apt-get install iptables): CI installs it")
		}
		t.Skip("needs iptables (apt-get install iptables)")
	}
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4)
	f.dropSYNs(t, 300*time.Millisecond)
	r, _ := f.attack(t, nil, "20s", cdnV4.String(), "4", "evil.test", "early")
	if !r.OK || !strings.HasPrefix(r.Note, "sent-in-syn-sent") || !cdn.Saw("evil.test") {
		t.Fatalf("unconfined: %s; the CDN recorded %q: the send must begin during the connect and deliver evil.test", r, cdn.SNIs())
	}
	cdn = f.w.ServeCDNReset(cdn)
	t0 := f.quiet(t, cdnV4)
	for _, sni := range []string{"evil.test", "cdn.test"} {
		f.dropSYNs(t, 300*time.Millisecond)
		start := time.Now()
		r, stderr := f.attack(t, []string{"--allow", "cdn.test"}, "20s", "cdn.test", "4", sni, "early")
		took := time.Since(start)
		t.Logf("confined, %s: %s after %v", sni, r, took.Round(time.Millisecond))
		if !strings.HasPrefix(r.Note, "sent-in-syn-sent") {
			t.Fatalf("confined, %s: the send did not begin before the connection was established (%s): the case proves nothing", sni, r)
		}
		// Fail closed for the allowed name too: the bytes were not judged.
		if r.OK || r.Timeout {
			t.Errorf("confined, %s: %s, want the connection to fail, not the probe to give up\n%s", sni, r, stderr)
		}
		if !strings.Contains(r.Note, "user-timeout=10000") {
			t.Errorf("confined, %s: %s, want the pending socket's TCP_USER_TIMEOUT at 10000 ms", sni, r)
		}
		if took > 16*time.Second {
			t.Errorf("confined, %s: the program took %v to fail, want at most about 10 s", sni, took)
		}
	}
	if n := len(cdn.SNIs()); n != 0 {
		t.Errorf("LEAK: the CDN recorded %q from the confined program", cdn.SNIs())
	}
	f.noWire(t, cdnV4, t0, true)
}

// TestSNIAttackCurlConnectTo: the escape with curl, its connection
// to the allowed name's address carrying the denied name.
func TestSNIAttackCurlConnectTo(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("needs curl (apt-get install curl): CI installs it")
		}
		t.Skip("needs curl (apt-get install curl)")
	}
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4, cdnV6)
	args := func(to string, url string) []string {
		a := []string{"-sSk", "--max-time", "5", "https://" + url + "/"}
		if to != "" {
			a = append([]string{"--connect-to", "evil.test:443:" + to + ":443"}, a...)
		}
		return a
	}
	// The twin, to the address itself (no name resolves unconfined).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := f.w.ClientCmd(ctx, curl, args(cdnV4.String(), "evil.test")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello evil.test") || !cdn.Saw("evil.test") {
		t.Fatalf("unconfined curl: %v: %s; the CDN recorded %q", err, out, cdn.SNIs())
	}
	// curl honours the proxy variables a session sets, so by default its
	// CONNECT is judged by the session's proxy; with --no-proxy-env it
	// connects itself, as a program that ignores them does, and the
	// kernel's check judges its ClientHello on curl's own socket.
	for _, v := range []struct {
		name  string
		flags []string
		who   string // the refusal line's beginning
	}{
		{"ThroughTheSessionProxy", []string{"--allow", "cdn.test"}, "proxy: refused connect to cdn.test:443"},
		{"Direct", []string{"--allow", "cdn.test", "--no-proxy-env"}, "refused curl["},
	} {
		t.Run(v.name, func(t *testing.T) {
			cdn = f.w.ServeCDNReset(cdn)
			t0 := f.quiet(t, cdnV4)
			stdout, stderr, code := f.run(t, v.flags, append([]string{curl}, args("cdn.test", "evil.test")...)...)
			if code == 0 || strings.Contains(stdout, "hello evil.test") || !strings.Contains(stderr, v.who) || !strings.Contains(stderr, refusedSNI) {
				t.Errorf("confined curl --connect-to: exit %d, stdout %q, want refused (%q ... %q) in:\n%s", code, stdout, v.who, refusedSNI, stderr)
			}
			if cdn.Saw("evil.test") {
				t.Errorf("LEAK: the CDN recorded evil.test from confined curl: %q", cdn.SNIs())
			}
			f.noWire(t, cdnV4, t0, true)
			f.noWire(t, cdnV6, t0, true)
			stdout, _, code = f.run(t, v.flags, append([]string{curl}, args("", "cdn.test")...)...)
			if code != 0 || !strings.Contains(stdout, "hello cdn.test") || !cdn.Saw("cdn.test") {
				t.Errorf("confined curl https://cdn.test/: exit %d, stdout %q; the CDN recorded %q", code, stdout, cdn.SNIs())
			}
		})
	}
}
