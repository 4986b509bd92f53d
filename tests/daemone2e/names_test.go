// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/tests/world"
)

// TestDaemonSessionChecksNames: the shared-address escape (issue 18) in a
// daemon session. cdn.test is allowed, evil.test is not, one CDN address
// serves both. The daemon's session verifier lives in the daemon, in the
// session's network namespace; the refusal reaches the caller's terminal,
// the audit log and the metrics.
func TestDaemonSessionChecksNames(t *testing.T) {
	f := newFixture(t, "cdn.test")
	cdnV4, cdnV6 := netip.MustParseAddr("203.0.113.30"), netip.MustParseAddr("2001:db8:2::30")
	cdn := f.w.ServeCDN(t, cdnV4, cdnV6)
	fams := []struct {
		fam  string
		addr netip.Addr
	}{{"4", cdnV4}, {"6", cdnV6}}
	for _, c := range fams {
		// The twin: without sluice the CDN delivers evil.test there.
		if r := f.w.RunProbe(t, nil, "tls-name", c.addr.String(), c.fam, "443", "evil.test"); !r.OK || !cdn.Saw("evil.test") {
			t.Fatalf("IPv%s unconfined: %s", c.fam, r)
		}
		if r := f.w.RunProbe(t, nil, "http-name", c.addr.String(), c.fam, "80", "evil.test"); !r.OK {
			t.Fatalf("IPv%s unconfined HTTP: %s", c.fam, r)
		}
	}
	f.w.ServeCDNReset(cdn)
	for _, c := range fams {
		r, stderr := f.probeStderr(t, nil, "tls-name", "cdn.test", c.fam, "443", "evil.test")
		dst := netip.AddrPortFrom(c.addr, 443)
		if r.OK || !strings.Contains(stderr, fmt.Sprintf("-> %s (TLS SNI evil.test): %s", dst, allowedFor("cdn.test"))) {
			t.Errorf("IPv%s TLS: %s\n%s", c.fam, r, stderr)
		}
		f.waitAudit(t, "name_refused", func(e map[string]any) bool {
			return e["host"] == "evil.test" && e["dst"] == c.addr.String() && e["proto"] == "TLS SNI" && e["comm"] == "probe"
		})
		r, stderr = f.probeStderr(t, nil, "http-name", "cdn.test", c.fam, "80", "evil.test")
		if r.OK || !strings.Contains(stderr, "(HTTP Host evil.test): "+allowedFor("cdn.test")) {
			t.Errorf("IPv%s HTTP: %s\n%s", c.fam, r, stderr)
		}
		if r := f.probe(t, nil, "tls-name", "cdn.test", c.fam, "443", "cdn.test"); !r.OK || r.From != dst.String() {
			t.Errorf("IPv%s cdn.test: %s", c.fam, r)
		}
	}
	if cdn.Saw("evil.test") {
		t.Fatalf("the CDN received evil.test: SNIs %q, hosts %q", cdn.SNIs(), cdn.Hosts())
	}
	// The counter, scraped while the session that was refused runs.
	script := fmt.Sprintf(`%s tls-name cdn.test 4 443 evil.test >/dev/null; curl -s http://%s/metrics`, world.BuildProbe(t), metricsAddr)
	out, _, _ := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
	if !regexp.MustCompile(`(?m)^sluice_name_checks_total\{session="[^"]+",verdict="refused"\} 1$`).MatchString(out) {
		t.Errorf("no refusal in sluice_name_checks_total:\n%s", out)
	}
	if cdn.Saw("evil.test") {
		t.Fatalf("the CDN received evil.test: SNIs %q", cdn.SNIs())
	}
}

// allowedFor is the end of a refusal's explanation: the names the address
// was learned for, on every DNS path (the kernel path's from
// kdns_learned_from).
func allowedFor(name string) string {
	return "the address was allowed for " + name
}
