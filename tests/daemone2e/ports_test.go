// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/tests/world"
)

// TestDaemonSessionPortRules: "ports" reach a session the daemon starts,
// from the session's own allowlist file (narrowing machine entries that
// allow every port) and from the machine allowlist itself: a port the rule
// lists is reached and recorded by the world, another port on the same
// address is EPERM with the rule named on the caller's terminal and in the
// daemon's audit log, and the world records nothing for it. A name's rule
// holds for the address the session learned for it, an IP entry's for
// that address. The twin: the same refused port is reached unconfined.
func TestDaemonSessionPortRules(t *testing.T) {
	f := newFixture(t, "allowed.test", "203.0.113.20")
	probe := world.BuildProbe(t)
	nameOK, nameNo := f.w.ListenTCP(t, world.AllowedV4), f.port
	addrOK, addrNo := f.w.ListenTCP(t, world.DeniedV4), f.denied
	if r := f.w.RunProbe(t, nil, "tcp", world.AllowedV4.String(), fmt.Sprint(nameNo)); !r.OK {
		t.Fatalf("unconfined twin: %s", r)
	}

	session := filepath.Join(f.dir, "session.json")
	f.writeFile(t, session, fmt.Appendf(nil, `{"allowed_hosts": [{"host": "allowed.test", "ports": ["%d/tcp"]}, {"host": "203.0.113.20", "ports": [%d]}]}`, nameOK, addrOK))
	machine := fmt.Appendf(nil, `{"allowed_hosts": [{"host": "allowed.test", "ports": ["%d/tcp"]}, {"host": "203.0.113.20", "ports": [%d]}]}`, nameOK, addrOK)
	for _, c := range []struct {
		name  string
		flags []string
		setup func(t *testing.T)
	}{
		{"session-file", []string{"--allowlist", session}, func(*testing.T) {}},
		{"machine", nil, func(t *testing.T) {
			f.writeFile(t, f.allow, machine)
			// The daemon applies a changed file to new sessions once it
			// has read it: wait for the policy_changed line.
			f.waitAudit(t, "policy_changed", func(e map[string]any) bool {
				return strings.Contains(fmt.Sprint(e["message"]), "reloaded "+f.allow)
			})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.setup(t)
			pol, err := allowlist.Parse(machine)
			if err != nil {
				t.Fatal(err)
			}
			nameRule, _ := pol.NamePorts("allowed.test")
			addrRule, _ := pol.AddrPorts(world.DeniedV4)
			script := fmt.Sprintf(`P=%s; $P resolve-tcp allowed.test %d; $P resolve-tcp allowed.test %d; $P tcp %s %d; $P tcp %s %d`,
				probe, nameNo, nameOK, world.DeniedV4, addrNo, world.DeniedV4, addrOK)
			before := make([]int, 4)
			before[0] = f.countAudit(t, refusedPort(world.AllowedV4, nameNo, nameRule.Explain(allowlist.ProtoTCP, nameNo)))
			before[2] = f.countAudit(t, refusedPort(world.DeniedV4, addrNo, addrRule.Explain(allowlist.ProtoTCP, addrNo)))
			start := time.Now()
			args := append(append([]string{"run", "--user", "65534:65534"}, c.flags...), "--", "sh", "-c", script)
			out, stderr, _ := f.sluice(t, 0, 0, args...)
			rs := results(t, out)
			if len(rs) != 4 {
				t.Fatalf("want 4 results, got %v\n%s", rs, stderr)
			}
			for i, want := range []struct {
				ok   bool
				addr netip.Addr
				port uint16
				rule allowlist.PortRule
			}{
				{false, world.AllowedV4, nameNo, nameRule}, {true, world.AllowedV4, nameOK, nameRule},
				{false, world.DeniedV4, addrNo, addrRule}, {true, world.DeniedV4, addrOK, addrRule},
			} {
				to := world.All(world.Since(start), world.ToPort(want.addr, want.port))
				if want.ok {
					if !rs[i].OK {
						t.Errorf("%s:%d, a port of the rule: %s", want.addr, want.port, rs[i])
					}
					if !f.w.WaitArrival(to, 2*time.Second) {
						t.Errorf("the world recorded nothing on the rule's port %s:%d", want.addr, want.port)
					}
					continue
				}
				if rs[i].OK || rs[i].Errno != "EPERM" {
					t.Errorf("%s:%d, outside the rule: %s, want EPERM", want.addr, want.port, rs[i])
				}
				reason := want.rule.Explain(allowlist.ProtoTCP, want.port)
				if line := fmt.Sprintf("-> %s/tcp: %s", netip.AddrPortFrom(want.addr, want.port), reason); !strings.Contains(stderr, line) {
					t.Errorf("the caller's terminal does not name the rule (%q):\n%s", line, stderr)
				}
				// This run's own line: the subtests refuse the same ports.
				if !f.waitAuditCount(t, before[i]+1, refusedPort(want.addr, want.port, reason)) {
					t.Errorf("no egress_denied line for %s:%d naming the rule (%q) in the audit log", want.addr, want.port, reason)
				}
				f.w.AssertNothingArrived(t, to, 300*time.Millisecond)
			}
		})
	}
}

// refusedPort matches the audit line of a refused TCP port.
func refusedPort(a netip.Addr, port uint16, reason string) func(map[string]any) bool {
	return func(e map[string]any) bool {
		return e["type"] == "egress_denied" && e["dst"] == a.String() && e["port"] == float64(port) && e["reason"] == reason
	}
}

// countAudit counts the audit log's lines that match.
func (f *fixture) countAudit(t *testing.T, match func(map[string]any) bool) int {
	t.Helper()
	if _, err := os.Stat(f.audit); err != nil {
		return 0
	}
	n := 0
	for _, e := range f.auditEvents(t) {
		if match(e) {
			n++
		}
	}
	return n
}

// waitAuditCount waits (bounded) until n lines of the audit log match.
func (f *fixture) waitAuditCount(t *testing.T, n int, match func(map[string]any) bool) bool {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if f.countAudit(t, match) >= n {
			return true
		}
	}
	return false
}
