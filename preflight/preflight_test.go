// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"strings"
	"testing"
)

// The status words are what scripts grep for.
func TestStatusString(t *testing.T) {
	for s, want := range map[Status]string{Pass: "ok", Warn: "warn", Fail: "FAIL", Status(7): "?"} {
		if got := s.String(); got != want {
			t.Errorf("Status(%d) = %q, want %q", int(s), got, want)
		}
	}
}

// One Fail makes enforcement impossible; warnings do not.
func TestFailed(t *testing.T) {
	if Failed(nil) || Failed([]Result{{Status: Pass}, {Status: Warn}}) {
		t.Error("no Fail, yet Failed")
	}
	if !Failed([]Result{{Status: Pass}, {Status: Fail}, {Status: Warn}}) {
		t.Error("a Fail, yet not Failed")
	}
}

// A missing mode warns; an available one passes.
func TestModeStatus(t *testing.T) {
	if got := modeStatus("unavailable: no Landlock"); got != Warn {
		t.Errorf("unavailable mode: %v, want warn", got)
	}
	if got := modeStatus("available through the daemon at /run/sluice/sluice.sock"); got != Pass {
		t.Errorf("available mode: %v, want ok", got)
	}
}

// Each DNS path is described by what happens to a query, and auto (and a
// path a newer daemon reports) by its failover.
func TestDNSPathDetail(t *testing.T) {
	for path, want := range map[string]string{
		"kernel":   "kernel: UDP DNS goes straight to the upstream",
		"resolver": "resolver: every query goes through the session's local resolver; none resolves",
		"auto":     "auto: queries go through the session's local resolver (and its cache); while it is down",
		"future":   "future: queries go through",
	} {
		if got := dnsPathDetail(path); !strings.HasPrefix(got, want) {
			t.Errorf("dnsPathDetail(%q) = %q, want it to start %q", path, got, want)
		}
	}
}

func TestFirstLineOf(t *testing.T) {
	for in, want := range map[string]string{"": "", "one": "one", "one\ntwo": "one", "\ntwo": ""} {
		if got := firstLineOf(in); got != want {
			t.Errorf("firstLineOf(%q) = %q, want %q", in, got, want)
		}
	}
}
