// SPDX-License-Identifier: Apache-2.0

//go:build linux

package modese2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/tests/world"
)

// The shared-address escape (issue 18) through the allowlist proxy, the
// only way out in the modes without BPF and every BPF session's
// fallback for programs that honour the proxy variables: cdn.test is
// allowed, evil.test is not, and one CDN address serves both, routing by
// SNI and Host. A tunnel to cdn.test that then names evil.test is domain
// fronting; the proxy must see it, as the datapath's verifier does.
var (
	cdnV4 = netip.MustParseAddr("203.0.113.30")
	cdnV6 = netip.MustParseAddr("2001:db8:2::30")
)

func TestProxyChecksNamesInTunnels(t *testing.T) {
	w := world.New(t)
	probe := world.BuildProbe(t)
	w.ServeDNS(t, upstreamDNS, world.Zone(map[string][]string{
		"cdn.test.":  {"A 203.0.113.30", "AAAA 2001:db8:2::30"},
		"evil.test.": {"A 203.0.113.30", "AAAA 2001:db8:2::30"},
		// The proxy dials A records first: an IPv6-only name takes its
		// tunnels to the CDN's IPv6 address.
		"cdn6.test.": {"AAAA 2001:db8:2::30"},
	}))
	cdn := w.ServeCDN(t, cdnV4, cdnV6)

	// The twin: without sluice the CDN delivers evil.test, over TLS and
	// plain HTTP, on the addresses it shares with cdn.test.
	for _, c := range []struct {
		fam  string
		addr netip.Addr
	}{{"4", cdnV4}, {"6", cdnV6}} {
		if r := w.RunProbe(t, nil, "tls-name", c.addr.String(), c.fam, "443", "evil.test"); !r.OK || !strings.Contains(r.Reply, "200") {
			t.Fatalf("IPv%s unconfined, TLS: %s", c.fam, r)
		}
		if r := w.RunProbe(t, nil, "http-name", c.addr.String(), c.fam, "80", "evil.test"); !r.OK || !strings.Contains(r.Reply, "200") {
			t.Fatalf("IPv%s unconfined, HTTP: %s", c.fam, r)
		}
	}
	// And on the CDN's other ports (issue 30).
	if r := w.RunProbe(t, nil, "tls-name", cdnV4.String(), "4", fmt.Sprint(world.CDNAltTLSPort), "evil.test"); !r.OK || !strings.Contains(r.Reply, "200") {
		t.Fatalf("unconfined, TLS on %d: %s", world.CDNAltTLSPort, r)
	}
	if r := w.RunProbe(t, nil, "http-name", cdnV4.String(), "4", fmt.Sprint(world.CDNAltHTTPPort), "evil.test"); !r.OK || !strings.Contains(r.Reply, "200") {
		t.Fatalf("unconfined, HTTP on %d: %s", world.CDNAltHTTPPort, r)
	}
	if !cdn.Saw("evil.test") {
		t.Fatalf("unconfined: the CDN recorded nothing for evil.test: %q %q", cdn.SNIs(), cdn.Hosts())
	}
	cdn = w.ServeCDNReset(cdn)

	logDir, err := os.MkdirTemp("", "sluice-modes-names-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(logDir) })
	if err := os.Chmod(logDir, 0o777); err != nil {
		t.Fatal(err)
	}
	honest := 0
	for _, mode := range []struct {
		name         string
		unprivileged bool
		flags        []string
	}{
		{"landlock", true, []string{"--mode", "landlock"}},
		{"proxy", true, []string{"--mode", "proxy"}},
		{"bpf-proxy", false, []string{"--mode", "bpf", "--user", "65534:65534"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			auditPath := filepath.Join(logDir, mode.name+".jsonl")
			flags := append(append([]string{"run"}, mode.flags...), "--dns-upstream", upstreamDNS.String(),
				"--allow", "cdn.test", "--allow", "cdn6.test", "--audit-log", auditPath, "--")
			for _, via := range []string{"proxy", "socks"} {
				for _, c := range []struct {
					action []string
					line   string
				}{
					{[]string{"tls-name", "cdn.test", via, "443", "evil.test"}, "(TLS SNI evil.test): the address was allowed for cdn.test"},
					{[]string{"http-name", "cdn.test", via, "80", "evil.test"}, "(HTTP Host evil.test): the address was allowed for cdn.test"},
					{[]string{"tls-name", "cdn6.test", via, "443", "evil.test"}, "-> [2001:db8:2::30]:443 (TLS SNI evil.test): the address was allowed for cdn6.test"},
					// Every port of a name's address is judged (issue 30).
					{[]string{"tls-name", "cdn.test", via, fmt.Sprint(world.CDNAltTLSPort), "evil.test"}, "(TLS SNI evil.test): the address was allowed for cdn.test"},
					{[]string{"http-name", "cdn.test", via, fmt.Sprint(world.CDNAltHTTPPort), "evil.test"}, "(HTTP Host evil.test): the address was allowed for cdn.test"},
					// Encrypted ClientHello: the inner name (evil.test)
					// is hidden, the outer one allowed: refused all the same.
					{[]string{"tls-ech", "cdn.test", via, "443", "evil.test", "cdn.test"}, "(TLS SNI cdn.test): the ClientHello carries an Encrypted ClientHello, whose inner SNI sluice cannot read"},
				} {
					r, stderr, _ := run(t, w, mode.unprivileged, append(append(flags, probe), c.action...)...)
					if r.OK {
						t.Errorf("%s via %s: went through: %s", c.action[0], via, r)
					}
					if !strings.Contains(stderr, "proxy: refused") || !strings.Contains(stderr, c.line) {
						t.Errorf("%s via %s: no explained refusal (%q) in:\n%s", c.action[0], via, c.line, stderr)
					}
					if c.action[0] != "tls-ech" && r.Errno != "ECONNRESET" {
						t.Errorf("%s via %s: the client got %s, want a reset (ECONNRESET)", c.action[0], via, r)
					}
				}
				// The honest name on the same tunnel works.
				r, stderr, _ := run(t, w, mode.unprivileged, append(flags, probe, "tls-name", "cdn.test", via, "443", "cdn.test")...)
				if !r.OK || !strings.Contains(r.Reply, "200") {
					t.Errorf("cdn.test via %s: %s\n%s", via, r, stderr)
				}
				honest++
				r, stderr, _ = run(t, w, mode.unprivileged, append(flags, probe, "tls-name", "cdn6.test", via, "443", "cdn6.test")...)
				if !r.OK || !strings.Contains(r.Reply, "200") {
					t.Errorf("cdn6.test via %s: %s\n%s", via, r, stderr)
				}
				honest++
				r, stderr, _ = run(t, w, mode.unprivileged, append(flags, probe, "http-name", "cdn.test", via, "80", "cdn.test")...)
				if !r.OK || !strings.Contains(r.Reply, "200") {
					t.Errorf("cdn.test over HTTP via %s: %s\n%s", via, r, stderr)
				}
				// A server that speaks first, on another port: heard
				// through the tunnel before the client says anything.
				r, stderr, _ = run(t, w, mode.unprivileged, append(flags, probe, "banner-reply", "cdn.test", via, fmt.Sprint(world.BannerPort), "SSH-2.0-probe")...)
				if !r.OK || !strings.Contains(r.Reply, world.Banner) || !strings.HasSuffix(r.Reply, "ok\n") {
					t.Errorf("a server that speaks first via %s: %s\n%s", via, r, stderr)
				}
			}
			// The audit log has the refusal as the datapath's path writes it.
			found := false
			for _, e := range world.ReadAuditLog(t, auditPath) {
				if e["type"] == "name_refused" && e["host"] == "evil.test" && e["proto"] == "TLS SNI" && e["port"] == float64(443) &&
					(e["dst"] == cdnV4.String() || e["dst"] == cdnV6.String()) && e["reason"] == "the address was allowed for cdn.test" {
					found = true
				}
			}
			if !found {
				t.Errorf("no name_refused event for evil.test in the audit log: %v", world.ReadAuditLog(t, auditPath))
			}
		})
	}
	// Nothing of evil.test reached the CDN, and no ClientHello but the
	// honest ones (an ECH ClientHello would have been recorded with its
	// outer SNI, cdn.test).
	if cdn.Saw("evil.test") {
		t.Errorf("the CDN received a ClientHello or request for evil.test: %q %q", cdn.SNIs(), cdn.Hosts())
	}
	if snis := cdn.SNIs(); len(snis) != honest {
		t.Errorf("the CDN received %d ClientHellos %q, want %d (the honest ones)", len(snis), snis, honest)
	}
}
