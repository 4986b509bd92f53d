// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
)

func entryStrings(p *allowlist.Policy) []string {
	var out []string
	for _, e := range p.Entries() {
		out = append(out, e.String())
	}
	slices.Sort(out)
	return out
}

// auditLog is a log of two sessions, in the format of docs/audit.md.
const auditLog = `{"time":"2026-11-30T01:00:00Z","type":"daemon_started","message":"sluice daemon started"}
{"time":"2026-11-30T01:00:01Z","type":"session_started","session":"run-1-aaaaaaaaaaaa","pid":10,"uid":1000,"exe":"/usr/bin/npm","entries":["registry.npmjs.org"],"message":"started"}
{"time":"2026-11-30T01:00:02Z","type":"dns_would_refuse","session":"run-1-aaaaaaaaaaaa","comm":"node[11]","host":"telemetry.example","reason":"not in the allowlist","message":"m"}
{"time":"2026-11-30T01:00:02Z","type":"egress_would_deny","session":"run-1-aaaaaaaaaaaa","pid":11,"comm":"node","uid":1000,"dst":"203.0.113.9","port":443,"proto":"tcp","reason":"not in the allowlist","message":"m"}
{"time":"2026-11-30T01:00:02Z","type":"egress_denied","session":"run-1-aaaaaaaaaaaa","pid":11,"comm":"node","uid":1000,"dst":"socket(AF_INET, SOCK_RAW, icmp)","reason":"only TCP and UDP sockets are allowed","message":"m"}
{"time":"2026-11-30T01:00:03Z","type":"session_started","session":"run-1-bbbbbbbbbbbb","pid":20,"uid":1000,"exe":"/usr/bin/curl","entries":["api.example.com"],"message":"started"}
{"time":"2026-11-30T01:00:04Z","type":"proxy_refused","session":"run-1-bbbbbbbbbbbb","host":"evil.example","port":443,"proto":"connect","reason":"evil.example is not in the allowlist","message":"m"}
{"time":"2026-11-30T01:00:05Z","type":"policy_changed","actor_uid":0,"entries":["everything.example"],"message":"m"}
`

func TestSuggestCommand(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(log, []byte(auditLog), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, error) {
		cmd := newRootCmd()
		var out, errb bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errb)
		cmd.SetArgs(append([]string{"suggest", "--from", log}, args...))
		err := cmd.Execute()
		return out.String(), errb.String(), err
	}
	load := func(data string) []string {
		t.Helper()
		p, err := allowlist.Parse([]byte(data))
		if err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		return entryStrings(p)
	}
	// Every session: both sessions' entries and refusals, not the
	// machine allowlist of policy_changed, not the refused socket.
	out, stderr, err := run()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"203.0.113.9", "api.example.com", "evil.example", "registry.npmjs.org", "telemetry.example"}
	if got := load(out); !slices.Equal(got, want) {
		t.Errorf("all sessions: %v, want %v (stderr %s)", got, want, stderr)
	}
	// One session, into a file.
	file := filepath.Join(dir, "s.json")
	if _, _, err := run("--session", "run-1-aaaaaaaaaaaa", "-o", file); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	if got, want := load(string(b)), []string{"203.0.113.9", "registry.npmjs.org", "telemetry.example"}; !slices.Equal(got, want) {
		t.Errorf("one session: %v, want %v", got, want)
	}
	// Another base.
	base := filepath.Join(dir, "base.json")
	_ = os.WriteFile(base, []byte(`{"allowed_hosts": ["evil.example", "api.example.com"]}`), 0o644)
	out, _, err = run("--session", "run-1-bbbbbbbbbbbb", "--allowlist", base)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := load(out), []string{"api.example.com", "evil.example"}; !slices.Equal(got, want) {
		t.Errorf("with a base that covers the refusal: %v, want %v", got, want)
	}
	// An unknown session, and a malformed log, are errors; nothing is written.
	if _, _, err := run("--session", "run-1-cccccccccccc"); err == nil || !strings.Contains(err.Error(), "no lines of session") {
		t.Errorf("unknown session: %v", err)
	}
	_ = os.WriteFile(log, []byte(auditLog+"{not json\n"), 0o644)
	other := filepath.Join(dir, "other.json")
	if _, _, err := run("-o", other); err == nil || !strings.Contains(err.Error(), "line 9") {
		t.Errorf("malformed line: %v", err)
	}
	if _, err := os.Stat(other); err == nil {
		t.Errorf("a suggestion was written from a malformed log")
	}
}
