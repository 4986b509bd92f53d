// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

// TestRunAuditLog: `sluice run --audit-log FILE` (embedded, BPF mode)
// writes the session's start, the kernel's denial with its destination
// and the end with the exit status, and a later session appends the
// resolver's refusal, every line in the daemon's documented format
// (docs/audit.schema.json).
func TestRunAuditLog(t *testing.T) {
	w := newWorld(t)
	p := w.ListenTCP(t, world.DeniedV4)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	start := time.Now()
	r, run := confinedProbe(t, w, defaultPolicy, []string{"--audit-log", path}, "tcp", world.DeniedV4.String(), port(p))
	wantDenied(t, r, "connect")
	w.AssertNothingArrived(t, arrived(start, world.DeniedV4, 0), settle)

	evs := world.ReadAuditLog(t, path)
	types := []string{}
	for _, e := range evs {
		types = append(types, e["type"].(string))
	}
	if len(evs) < 3 || types[0] != "session_started" || types[len(types)-1] != "session_ended" {
		t.Fatalf("audit log types %v, want session_started ... session_ended\n%s", types, run)
	}
	first, last := evs[0], evs[len(evs)-1]
	if first["pid"] == nil || first["uid"] != float64(65534) || first["exe"] == nil || first["session"] == "" {
		t.Errorf("session_started lacks who: %v", first)
	}
	if last["exit"] != float64(1) || last["session"] != first["session"] {
		t.Errorf("session_ended %v, want exit 1 of session %v", last, first["session"])
	}
	found := false
	for _, e := range evs {
		if e["type"] == "egress_denied" && e["dst"] == world.DeniedV4.String() && e["port"] == float64(p) && e["proto"] == "tcp" && e["comm"] == "probe" {
			found = true
		}
	}
	if !found {
		t.Errorf("no egress_denied line for %v:%d/tcp by the probe: %v", world.DeniedV4, p, evs)
	}

	// A second session appends; the resolver's refusal is on record too.
	if r, _ := confinedProbe(t, w, defaultPolicy, []string{"--audit-log", path}, "resolve", "exfil.example"); r.OK {
		t.Fatalf("a name that is not allowed resolved: %s", r)
	}
	found = false
	for _, e := range world.ReadAuditLog(t, path)[len(evs):] {
		if e["type"] == "dns_refused" && e["host"] == "exfil.example" && e["reason"] == "not in the allowlist" {
			found = true
		}
	}
	if !found {
		t.Errorf("no dns_refused line for exfil.example")
	}
}

// TestRunAuditLogRateLimit: a flood of denials writes at most the burst,
// and events_suppressed accounts for the rest, as in the daemon's log.
// When the kernel's event ring drops so many that the limit is never
// reached, the flood is tried again under SLUICE_REQUIRE_KERNEL=1 and the
// test fails if it never is (package needs).
func TestRunAuditLogRateLimit(t *testing.T) {
	w := newWorld(t)
	p := w.ListenTCP(t, world.DeniedV4)
	const n = 3000
	script := fmt.Sprintf(`for i in $(seq %d); do : 2>/dev/null >/dev/tcp/%s/%d; done; true`, n, world.DeniedV4, p)
	for attempt := 1; ; attempt++ {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		start := time.Now()
		run := runSluice(t, w, runArgs(defaultPolicy, []string{"--audit-log", path}, "bash", "-c", script)...)
		if run.Code != 0 {
			t.Fatalf("flood: %v", run)
		}
		elapsed := time.Since(start)
		w.AssertNothingArrived(t, arrived(start, world.DeniedV4, 0), settle)
		written, suppressed := 0, 0
		for _, e := range world.ReadAuditLog(t, path) {
			switch e["type"] {
			case "egress_denied":
				written++
			case "events_suppressed":
				suppressed += int(e["suppressed"].(float64))
			}
		}
		t.Logf("attempt %d: %d denials in %v: %d written, %d suppressed", attempt, n, elapsed, written, suppressed)
		most := 1000 + int(100*elapsed.Seconds()) + 10
		if written+suppressed <= most {
			// The kernel's event ring (its losses are counted, not
			// reported here) dropped so many that the limit was never reached.
			if attempt < needs.Attempts() {
				continue
			}
			needs.Enough(t, attempt, "only %d of %d denials reached sluice: the rate limit was not exercised", written+suppressed, n)
			return
		}
		if written > most || suppressed == 0 || written+suppressed > n {
			t.Errorf("written %d + suppressed %d of %d denials: want at most %d written and the rest counted as suppressed", written, suppressed, n, most)
		}
		return
	}
}
