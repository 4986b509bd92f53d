// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/report"
)

func TestAskMode(t *testing.T) {
	env := func(ci string) func(string) string {
		return func(k string) string {
			if k == "CI" {
				return ci
			}
			return ""
		}
	}
	for _, tc := range []struct {
		v, ci, want string
		bad         bool
	}{
		{"", "", askOff, false},
		{"on", "", askOn, false},
		{"on", "true", askNever, false},
		{"never", "", askNever, false},
		{"sometimes", "", "", true},
	} {
		got, err := askMode(tc.v, env(tc.ci))
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("askMode(%q, CI=%q) = %q, %v; want %q", tc.v, tc.ci, got, err, tc.want)
		}
	}
}

func TestWriteWouldAsk(t *testing.T) {
	rep := report.New(&bytes.Buffer{})
	rep.Report(audit.Event{Type: audit.DNSRefused, Host: "new.test", Reason: "not in the allowlist", Message: "refused"}, nil)
	base, err := allowlist.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	sum := filepath.Join(t.TempDir(), "summary.md")
	writeWouldAsk(rep, base, &stderr, sum)
	if !strings.Contains(stderr.String(), "would ask: new.test") || !strings.Contains(stderr.String(), `+ "new.test"`) {
		t.Fatalf("stderr:\n%s", stderr.String())
	}
	b, err := os.ReadFile(sum)
	if err != nil || !strings.Contains(string(b), "+ \"new.test\"") {
		t.Fatalf("summary %q %v", b, err)
	}
}
