// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// TestSessionProxyUsesDaemonDNS: a daemon session's proxy resolves with
// the daemon's DNS settings (--dns-upstream, the world's only DNS server
// here), not the host's resolv.conf, and shares the session's learned set.
func TestSessionProxyUsesDaemonDNS(t *testing.T) {
	f := newFixture(t, "allowed.test")
	probe := world.BuildProbe(t)
	port := fmt.Sprint(f.port)

	// Positive: an allowed name through the session's proxy.
	if r := f.probe(t, nil, "proxy-connect", "allowed.test", port); !r.OK || r.Reply != world.Greeting {
		t.Fatalf("allowed.test through the daemon session's proxy: %s", r)
	}
	if !f.dns.Saw("allowed.test.") {
		t.Fatal("the daemon's DNS server was never asked for allowed.test")
	}

	// Negative: a name off the allowlist (the DNS server knows it) is
	// refused by the proxy and never forwarded.
	out, stderr, _ := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", probe, "proxy-connect", "allowed2.test", port)
	r, _ := world.ParseProbeResult([]byte(out))
	if r.OK || !strings.Contains(r.Error, "403") || !strings.Contains(stderr, "allowed2.test is not in the allowlist") {
		t.Fatalf("allowed2.test through the proxy: %s\n%s", r, stderr)
	}
	if f.dns.Saw("allowed2.test") {
		t.Error("a name off the allowlist was forwarded to the DNS server")
	}

	// The proxy's lookup is the session's: it taught the datapath, so the
	// same session may then connect to the address directly, without a
	// DNS query of its own...
	script := fmt.Sprintf(`%[1]s proxy-connect allowed.test %[2]s >/dev/null && exec %[1]s tcp %[3]s %[2]s`, probe, port, world.AllowedV4)
	out, _, _ = f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
	if r, _ := world.ParseProbeResult([]byte(out)); !r.OK {
		t.Fatalf("direct connect after the proxy's lookup in the same session: %s", out)
	}
	// ...which a session that never asked may not (the twin that shows
	// the address is not allowed otherwise).
	if r := f.probe(t, nil, "tcp", world.AllowedV4.String(), port); r.OK || r.Errno != "EPERM" {
		t.Fatalf("direct connect without a lookup: %s", r)
	}
	// No lookup went to any server but the daemon's upstream.
	f.w.AssertNothingArrived(t, func(p world.Packet) bool { return p.DstPort == 53 && p.Dst != dnsAddr }, 200*time.Millisecond)
}
