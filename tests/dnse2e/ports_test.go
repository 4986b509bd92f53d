// SPDX-License-Identifier: Apache-2.0

//go:build linux

package dnse2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/tests/world"
)

// TestPortRules: an entry's "ports" are enforced in the kernel for TCP
// (connect) and UDP (sendmsg), for an address learned from a name and for
// an IP entry, IPv4 and IPv6. Each refused port has its twin, a port the rule lists on the
// same address, which the world records; the refused one it never sees.
func TestPortRules(t *testing.T) {
	f := newFixture(t)
	probe := world.BuildProbe(t)
	for _, tc := range []struct {
		name   string
		host   string     // the entry
		target string     // what the probe is given for TCP: a name or the address
		addr   netip.Addr // where the connections go
	}{
		{"by-name", "allowed.test", "allowed.test", world.AllowedV4},
		{"by-address", world.DeniedV4.String(), world.DeniedV4.String(), world.DeniedV4},
		// IPv6: the rules of connect6 and sendmsg6 (allowed6.test has
		// only an AAAA record).
		{"by-name-v6", "allowed6.test", "allowed6.test", world.AllowedV6},
		{"by-address-v6", world.DeniedV6.String(), world.DeniedV6.String(), world.DeniedV6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tcpOK, tcpNo := f.w.ListenTCP(t, tc.addr), f.w.ListenTCP(t, tc.addr)
			udpOK, udpNo := f.w.ListenUDP(t, tc.addr), f.w.ListenUDP(t, tc.addr)
			entry := fmt.Sprintf(`{"host": %q, "ports": ["%d/tcp", "%d/udp"]}`, tc.host, tcpOK, udpOK)
			file := filepath.Join(t.TempDir(), "network_allowlist.json")
			if err := os.WriteFile(file, []byte(`{"allowed_hosts": [`+entry+`]}`), 0o644); err != nil {
				t.Fatal(err)
			}
			pol, err := allowlist.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			rule, ok := pol.NamePorts(tc.host)
			if !ok {
				rule, _ = pol.AddrPorts(tc.addr)
			}
			tcp := "tcp " + tc.addr.String()
			if tc.target != tc.addr.String() {
				tcp = "resolve-tcp " + tc.target
			}
			// The name is resolved first in the by-name case, so the UDP
			// sends go to an address learned with the entry's rule.
			script := fmt.Sprintf(`P=%s; $P %s %d; $P %s %d; $P udp %s %d; $P udp-connected %s %d`,
				probe, tcp, tcpNo, tcp, tcpOK, tc.addr, udpNo, tc.addr, udpOK)
			start := time.Now()
			out, stderr, _ := f.run(t, []string{"--allowlist", file}, "sh", "-c", script)
			rs := results(t, out)
			if len(rs) != 4 {
				t.Fatalf("want 4 results, got %v", rs)
			}
			for i, want := range []struct {
				ok    bool
				port  uint16
				proto uint8
			}{{false, tcpNo, unix.IPPROTO_TCP}, {true, tcpOK, unix.IPPROTO_TCP}, {false, udpNo, unix.IPPROTO_UDP}, {true, udpOK, unix.IPPROTO_UDP}} {
				r := rs[i]
				to := world.All(world.Since(start), world.ToPort(tc.addr, want.port), world.Proto(want.proto))
				pname := map[uint8]string{unix.IPPROTO_TCP: "tcp", unix.IPPROTO_UDP: "udp"}[want.proto]
				if want.ok {
					if !r.OK {
						t.Errorf("port %d/%s of the rule refused: %v", want.port, pname, r)
					}
					if !f.w.WaitArrival(to, 2*time.Second) {
						t.Errorf("the world recorded nothing on the allowed port %d/%s", want.port, pname)
					}
					continue
				}
				if r.OK || r.Errno != "EPERM" {
					t.Errorf("port %d/%s outside the rule: %v, want EPERM", want.port, pname, r)
				}
				line := fmt.Sprintf("-> %s/%s: %s", netip.AddrPortFrom(tc.addr, want.port), pname, rule.Explain(want.proto, want.port))
				if !strings.Contains(stderr, line) {
					t.Errorf("stderr does not name the rule (%q):\n%s", line, stderr)
				}
				f.w.AssertNothingArrived(t, to, 300*time.Millisecond)
			}
		})
	}
}

// TestPortRulesUnconfined is the twin of TestPortRules' refusals: without
// sluice the same probe reaches the port the rule leaves out, over IPv4
// and IPv6.
func TestPortRulesUnconfined(t *testing.T) {
	f := newFixture(t)
	probe := world.BuildProbe(t)
	for _, a := range []netip.Addr{world.DeniedV4, world.DeniedV6} {
		p := f.w.ListenTCP(t, a)
		start := time.Now()
		out, err := f.w.ClientCmd(t.Context(), probe, "tcp", a.String(), fmt.Sprint(p)).Output()
		if err != nil {
			t.Fatalf("unconfined probe to %s: %v %s", a, err, out)
		}
		if r, err := world.ParseProbeResult(out); err != nil || !r.OK {
			t.Fatalf("unconfined probe to %s: %v %v", a, r, err)
		}
		if !f.w.WaitArrival(world.All(world.Since(start), world.ToPort(a, p)), 2*time.Second) {
			t.Fatalf("the world recorded no unconfined connection to %s", a)
		}
	}
}

// TestPortRulesUnionOfNames: one address learned for two names with
// different port rules is open on the union of both, from the moment the
// second name is learned; a port in neither is refused naming both rules.
func TestPortRulesUnionOfNames(t *testing.T) {
	f := newFixture(t)
	probe := world.BuildProbe(t)
	a := world.AllowedV4 // allowed.test and a.wild.test both resolve to it
	p1, p2, p3 := f.w.ListenTCP(t, a), f.w.ListenTCP(t, a), f.w.ListenTCP(t, a)
	file := filepath.Join(t.TempDir(), "network_allowlist.json")
	body := fmt.Sprintf(`{"allowed_hosts": [{"host": "allowed.test", "ports": ["%d/tcp"]}, {"host": "a.wild.test", "ports": ["%d/tcp"]}]}`, p1, p2)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`P=%[1]s; $P resolve-tcp allowed.test %[2]d; $P tcp %[5]s %[3]d; $P resolve-tcp a.wild.test %[3]d; $P tcp %[5]s %[2]d; $P tcp %[5]s %[4]d`,
		probe, p1, p2, p3, a)
	start := time.Now()
	out, stderr, _ := f.run(t, []string{"--allowlist", file}, "sh", "-c", script)
	rs := results(t, out)
	if len(rs) != 5 {
		t.Fatalf("want 5 results, got %v", rs)
	}
	for i, ok := range []bool{true, false, true, true, false} {
		if rs[i].OK != ok || (!ok && rs[i].Errno != "EPERM") {
			t.Errorf("step %d: %v, want ok=%v (EPERM when refused)", i, rs[i], ok)
		}
	}
	first := fmt.Sprintf(`-> %s/tcp: port %d is not in the rule "allowed.test" ports %d/tcp`, netip.AddrPortFrom(a, p2), p2, p1)
	both := fmt.Sprintf(`-> %s/tcp: port %d is not in the rules "allowed.test" ports %d/tcp, "a.wild.test" ports %d/tcp`, netip.AddrPortFrom(a, p3), p3, p1, p2)
	for _, l := range []string{first, both} {
		if !strings.Contains(stderr, l) {
			t.Errorf("stderr lacks %q:\n%s", l, stderr)
		}
	}
	// p2 was reached only after a.wild.test was learned (one connection),
	// p3 never.
	if got := f.w.Arrivals(world.All(world.Since(start), world.ToPort(a, p2), world.Proto(unix.IPPROTO_TCP))); len(got) == 0 {
		t.Error("the world recorded nothing on the second name's port")
	}
	f.w.AssertNothingArrived(t, world.All(world.Since(start), world.ToPort(a, p3)), 300*time.Millisecond)
}
