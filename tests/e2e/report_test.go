// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// TestAudit: --audit lets a connection the policy would deny go through
// and reports it as "audit: would deny".
func TestAudit(t *testing.T) {
	w := newWorld(t)
	audit := []string{"--audit"}
	t.Run("tcp", func(t *testing.T) {
		p := w.ListenTCP(t, world.DeniedV4)
		start := time.Now()
		r, run := confinedProbe(t, w, defaultPolicy, audit, "tcp", world.DeniedV4.String(), port(p))
		wantOK(t, r)
		if r.Reply != world.Greeting {
			t.Errorf("got %q, want the greeting", r.Reply)
		}
		wantArrival(t, w, arrived(start, world.DeniedV4, p), "the audited connect")
		wantDenialLine(t, run.Stderr, "audit: would deny", dest(world.DeniedV4, p, "tcp"), "not in the allowlist")
		if l := denialLines(run.Stderr); len(l) > 0 {
			t.Errorf("audit mode printed denials: %q", l)
		}
		if want := "sluice: audit: 1 attempt to reach 1 destination would have been denied"; !strings.Contains(run.Stderr, want) {
			t.Errorf("stderr lacks the audit summary %q:\n%s", want, run.Stderr)
		}
	})
	t.Run("allowed-is-silent", func(t *testing.T) {
		p := w.ListenTCP(t, world.AllowedV4)
		r, run := confinedProbe(t, w, defaultPolicy, audit, "tcp", world.AllowedV4.String(), port(p))
		wantOK(t, r)
		if strings.Contains(run.Stderr, "audit") {
			t.Errorf("an allowed connect was reported in audit mode:\n%s", run.Stderr)
		}
	})
	// Audit mode lets the routing header be set, but the egress hook
	// still drops every source-routed packet: it is on its way to an
	// address no hook judged.
	t.Run("srh-egress-backstop", func(t *testing.T) {
		p := w.ListenTCP(t, world.AllowedV6)
		start := time.Now()
		r, run := confinedProbe(t, w, defaultPolicy, audit, "-timeout", "500ms", "srh", world.AllowedV6.String(), world.DeniedV6.String(), port(p))
		if r.OK {
			t.Errorf("a source-routed connect succeeded in audit mode: %v", r)
		}
		w.AssertNothingArrived(t, arrived(start, world.DeniedV6, 0), settle)
		wantDenialLine(t, run.Stderr, "audit: would deny", "setsockopt(IPV6_RTHDR)", sourceRouteReason)
		// The dropped packet is reported with its transport protocol,
		// as the IPv4 path does (not the IPv6 routing header's next
		// header number, "proto 43").
		wantDenialLine(t, run.Stderr, "denied", world.DeniedV6.String()+" (source-routed tcp packet)", sourceRouteReason)
		// One denial, one destination: the audited setsockopt is not a
		// destination of a denied attempt.
		wantSummary(t, run.Stderr, 1, 1)
	})
	t.Run("ping", func(t *testing.T) {
		start := time.Now()
		r, run := confinedProbe(t, w, defaultPolicy, audit, "ping", world.AllowedV4.String())
		wantOK(t, r)
		wantArrival(t, w, icmpTo(start, world.AllowedV4), "the audited ping")
		wantDenialLine(t, run.Stderr, "audit: would deny", "socket(AF_INET, SOCK_DGRAM, icmp)", socketReason)
	})
}

// TestDenialRateLimit: a retry loop of 50 denied connects prints about ten
// lines (a burst, then one per second), and the summary still counts all
// 50.
func TestDenialRateLimit(t *testing.T) {
	w := newWorld(t)
	const attempts = 50
	p := w.ListenTCP(t, world.DeniedV4)
	start := time.Now()
	script := fmt.Sprintf("for i in $(seq %d); do %s; done", attempts, probeLine(t, "tcp", world.DeniedV4.String(), port(p)))
	run := shellCommand(t, w, defaultPolicy, nil, script)
	rs := probeLines(t, run.Stdout)
	if len(rs) != attempts {
		t.Fatalf("%d probe results, want %d", len(rs), attempts)
	}
	for _, r := range rs {
		wantDenied(t, r, "connect")
	}
	w.AssertNothingArrived(t, arrived(start, world.DeniedV4, 0), settle)

	shown := len(denialLines(run.Stderr))
	limit := 10 + int(run.Elapsed/time.Second) + 1
	if shown == 0 || shown > limit {
		t.Errorf("%d denial lines for %d attempts in %v, want 1 to %d", shown, attempts, run.Elapsed.Round(time.Millisecond), limit)
	}
	// Every attempt is accounted for: shown, or counted as not shown.
	hidden := 0
	for _, m := range regexp.MustCompile(`(?m)^sluice: \((\d+) more denials not shown\)$`).FindAllStringSubmatch(run.Stderr, -1) {
		n, _ := strconv.Atoi(m[1])
		hidden += n
	}
	sum := regexp.MustCompile(`(?m)^sluice: denied (\d+) attempts to reach 1 destination(?: \((\d+) not shown above\))?$`).FindStringSubmatch(run.Stderr)
	if sum == nil {
		t.Fatalf("no summary line:\n%s", run.Stderr)
	}
	if sum[1] != strconv.Itoa(attempts) {
		t.Errorf("summary counts %s attempts, want %d", sum[1], attempts)
	}
	if sum[2] != "" {
		n, _ := strconv.Atoi(sum[2])
		hidden += n
	}
	if shown+hidden != attempts {
		t.Errorf("%d lines shown + %d reported as not shown = %d, want %d", shown, hidden, shown+hidden, attempts)
	}
}
