// SPDX-License-Identifier: Apache-2.0

//go:build linux

package modese2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// upstreamDNS is the only DNS server of the proxy DNS tests' world, given
// with --dns-upstream. The host's resolv.conf names another server, which
// from the client namespace leads only into the world, where nothing
// answers for it.
var upstreamDNS = netip.MustParseAddr("203.0.113.53")

// proxyDNSWorld is a world whose DNS server knows allowed.test and
// denied.test, with a TCP server behind each.
type proxyDNSWorld struct {
	w               *world.World
	dns             *world.DNSServer
	probe           string
	allowed, denied string // ports
}

func newProxyDNSWorld(t *testing.T) *proxyDNSWorld {
	w := world.New(t)
	f := &proxyDNSWorld{w: w, probe: world.BuildProbe(t)}
	f.dns = w.ServeDNS(t, upstreamDNS, world.Zone(map[string][]string{
		"allowed.test.": {"A 203.0.113.10"},
		"denied.test.":  {"A 203.0.113.20"},
		// An allowed name pointing at loopback: DNS rebinding.
		"rebind.test.": {"A 127.0.0.1"},
	}))
	f.allowed = fmt.Sprint(w.ListenTCP(t, world.AllowedV4))
	f.denied = fmt.Sprint(w.ListenTCP(t, world.DeniedV4))
	return f
}

// otherDNS matches DNS packets to any server but the session's upstream.
func otherDNS(p world.Packet) bool { return p.DstPort == 53 && p.Dst != upstreamDNS }

// check runs the positive and the negative case of one mode: an allowed
// name reached through the session's proxy, resolved by --dns-upstream and
// nothing else; a name off the allowlist refused by the proxy, never
// forwarded to the DNS server, never reached.
func (f *proxyDNSWorld) check(t *testing.T, unprivileged bool, mode ...string) {
	t.Helper()
	flags := append(append([]string{"run"}, mode...), "--dns-upstream", upstreamDNS.String(), "--allow", "allowed.test", "--allow", "rebind.test", "--")

	r, stderr, _ := run(t, f.w, unprivileged, append(flags, f.probe, "proxy-connect", "allowed.test", f.allowed)...)
	if !r.OK || r.Reply != world.Greeting {
		t.Fatalf("allowed.test through the session's proxy: %s\n%s", r, stderr)
	}
	if !f.dns.Saw("allowed.test.") {
		t.Fatal("the --dns-upstream server was never asked for allowed.test")
	}
	if !f.w.WaitArrival(world.ToPort(world.AllowedV4, mustPort(t, f.allowed)), time.Second) {
		t.Fatal("the allowed host saw nothing")
	}

	r, stderr, _ = run(t, f.w, unprivileged, append(flags, f.probe, "proxy-connect", "denied.test", f.denied)...)
	if r.OK || !strings.Contains(r.Error, "403") || !strings.Contains(stderr, "denied.test is not in the allowlist") {
		t.Fatalf("denied.test through the session's proxy: %s\n%s", r, stderr)
	}
	if f.dns.Saw("denied.test") {
		t.Error("a name off the allowlist was forwarded to the DNS server")
	}
	f.w.AssertNothingArrived(t, world.To(world.DeniedV4), 200*time.Millisecond)

	// The answer is filtered as the session's resolver filters: an
	// allowed name that resolves to loopback is refused, and says why.
	r, stderr, _ = run(t, f.w, unprivileged, append(flags, f.probe, "proxy-connect", "rebind.test", f.allowed)...)
	if r.OK || !strings.Contains(r.Error, "403") || !strings.Contains(r.Error, "rebind.test resolves only to addresses sluice refuses: 127.0.0.1 (loopback)") {
		t.Fatalf("rebind.test through the session's proxy: %s\n%s", r, stderr)
	}
	// No lookup went anywhere but to --dns-upstream (the host's resolver
	// in particular).
	f.w.AssertNothingArrived(t, otherDNS, 0)
}

func mustPort(t *testing.T, s string) uint16 {
	t.Helper()
	var p uint16
	if _, err := fmt.Sscan(s, &p); err != nil {
		t.Fatalf("port %q: %v", s, err)
	}
	return p
}

func TestProxyUsesDNSUpstreamBPF(t *testing.T) {
	f := newProxyDNSWorld(t)
	f.check(t, false, "--mode", "bpf", "--user", "65534:65534")

	// The proxy's lookup is the session's own: it taught the datapath, so
	// the same session may then connect to the address directly, without
	// a DNS query of its own...
	flags := []string{"run", "--mode", "bpf", "--user", "65534:65534", "--dns-upstream", upstreamDNS.String(), "--allow", "allowed.test", "--"}
	script := fmt.Sprintf(`%[1]s proxy-connect allowed.test %[2]s >/dev/null && exec %[1]s tcp %[3]s %[2]s`, f.probe, f.allowed, world.AllowedV4)
	if r, stderr, _ := run(t, f.w, false, append(flags, "sh", "-c", script)...); !r.OK {
		t.Fatalf("direct connect after the proxy's lookup in the same session: %s\n%s", r, stderr)
	}
	// ...which a session that never asked may not.
	if r, _, _ := run(t, f.w, false, append(flags, f.probe, "tcp", world.AllowedV4.String(), f.allowed)...); r.OK || r.Errno != "EPERM" {
		t.Fatalf("direct connect without a lookup: %s", r)
	}
}

func TestProxyUsesDNSUpstreamLandlock(t *testing.T) {
	f := newProxyDNSWorld(t)
	f.check(t, true, "--mode", "landlock")
}

func TestProxyUsesDNSUpstreamProxyMode(t *testing.T) {
	f := newProxyDNSWorld(t)
	f.check(t, true, "--mode", "proxy")
}
