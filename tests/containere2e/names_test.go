// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
	"github.com/sluice-dev/sluice/tests/world"
)

// TestContainerChecksNames is the shared-address escape (issue 18) from a
// whole container: cdn.test is in the container's policy, evil.test only
// in the machine allowlist, and one CDN address serves both, routing by
// SNI. The container's connection to cdn.test's address with the SNI
// evil.test is refused (the verifier dials from the container's own
// namespace, so nothing reaches the CDN for it), its honest connection
// works, and an unconfined container in the same namespace gets evil.test
// from the CDN (the twin).
func TestContainerChecksNames(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	w := world.New(t)
	cdnAddr := netip.MustParseAddr("203.0.113.30")
	cdn := w.ServeCDN(t, cdnAddr)
	w.ServeDNS(t, dnsAddr, world.Zone(map[string][]string{"cdn.test.": {"A " + cdnAddr.String()}, "evil.test.": {"A " + cdnAddr.String()}}))
	pd := startPolicyDaemon(t, w, []string{"cdn.test", "evil.test"}, map[string][]string{"web": {"cdn.test"}})
	probe := world.BuildProbe(t)
	removeAtCleanup(t, e, "twin", "names")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.Docker(ctx, "run", "-d", "--name", "names", "--network", "none", "--cgroup-parent=/"+pd.instance,
		"--label", "sluice.policy=web", "-v", probe+":/usr/local/bin/probe:ro", dockertest.BaseImage, "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	moveClientLink(t, w, containerPid(t, e, "names"))
	waitAudit(t, pd.audit, "session_started", 1)
	startIn(t, e, "twin", "names", probe)

	if r := probeIn(t, e, "twin", "tls-name", cdnAddr.String(), "4", "443", "evil.test"); !r.OK || !strings.Contains(r.Reply, "200") {
		t.Fatalf("unconfined twin: %s", r)
	}
	if !cdn.Saw("evil.test") {
		t.Fatal("unconfined twin: the CDN recorded no ClientHello for evil.test")
	}
	cdn = w.ServeCDNReset(cdn)

	if r := probeIn(t, e, "names", "tls-name", "cdn.test", "4", "443", "evil.test"); r.OK {
		t.Errorf("the container's cdn.test connection with the SNI evil.test: %s, want refused", r)
	}
	if r := probeIn(t, e, "names", "tls-name", "cdn.test", "4", "443", "cdn.test"); !r.OK || !strings.Contains(r.Reply, "200") {
		b, _ := os.ReadFile(pd.audit)
		t.Errorf("the container's cdn.test connection with its own SNI: %s; audit log:\n%s", r, b)
	}
	if cdn.Saw("evil.test") {
		t.Errorf("the CDN received a ClientHello for evil.test from the container: %q", cdn.SNIs())
	}
	if !cdn.Saw("cdn.test") {
		t.Errorf("the CDN never saw the container's cdn.test: %q", cdn.SNIs())
	}
	ev := waitAudit(t, pd.audit, "name_refused", 1)
	if msg, _ := ev["message"].(string); !strings.Contains(msg, "evil.test") {
		t.Errorf("name_refused line without the refused name: %v", ev)
	}
}
