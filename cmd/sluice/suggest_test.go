// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/proxy"
)

func entryStrings(p *allowlist.Policy) []string {
	var out []string
	for _, e := range p.Entries() {
		out = append(out, e.String())
	}
	slices.Sort(out)
	return out
}

// TestSuggestion feeds a reporter the events of every mode and reads the
// written file back with the allowlist parser.
func TestSuggestion(t *testing.T) {
	base, err := allowlist.Parse([]byte(`{"allowed_hosts": ["api.example.com", "*.cdn.example", "198.51.100.0/24",
		{"host": "intranet.example", "allow_private": true, "owner": "team:a"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := newReporter(&out)
	r.suggest.search = nil // not this machine's resolv.conf
	// Kernel: an address dialled without a name; an expired learned one,
	// a refused socket and loopback suggest nothing.
	r.Report(audit.FromKernelBrief("", loader.Event{Reason: loader.ReasonNotAllowed, Addr: netip.MustParseAddr("203.0.113.7"), Port: 443, Proto: 6}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Reason: loader.ReasonNotAllowed, Addr: netip.MustParseAddr("::ffff:203.0.113.8"), Port: 443, Proto: 6}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Reason: loader.ReasonExpired, Addr: netip.MustParseAddr("203.0.113.9"), Port: 443, Proto: 6}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Reason: loader.ReasonSocketType}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Reason: loader.ReasonNotAllowed, Addr: netip.MustParseAddr("198.51.100.9"), Port: 80, Proto: 6, Audit: true}), nil)
	// DNS: a refused name (twice, in another case), a reverse lookup, an
	// invalid name, one already allowed by the wildcard, and rebinding.
	r.Report(audit.FromDNS("", dnsresolver.Event{Kind: dnsresolver.EventRefused, Name: "registry.npmjs.org", Reason: dnsresolver.ReasonNotAllowed}, ""), nil)
	r.Report(audit.FromDNS("", dnsresolver.Event{Kind: dnsresolver.EventRefused, Audit: true, Name: "Registry.NPMJS.org.", Reason: dnsresolver.ReasonNotAllowed}, ""), nil)
	r.Report(audit.FromDNS("", dnsresolver.Event{Kind: dnsresolver.EventRefused, Name: "7.113.0.203.in-addr.arpa", Reason: "reverse lookups are answered only for addresses this session learned"}, ""), nil)
	r.Report(audit.FromDNS("", dnsresolver.Event{Kind: dnsresolver.EventRefused, Name: "bad_name!", Reason: dnsresolver.ReasonNotAllowed}, ""), nil)
	r.Report(audit.FromDNS("", dnsresolver.Event{Kind: dnsresolver.EventRefused, Name: "img.cdn.example", Reason: dnsresolver.ReasonNotAllowed}, ""), nil)
	r.Report(audit.FromDNS("", dnsresolver.Event{Kind: dnsresolver.EventRebinding, Name: "api.example.com", Addr: netip.MustParseAddr("10.0.0.1")}, ""), nil)
	// Proxy: a name, an IP literal, a rebinding refusal.
	proxyEvent := onProxyEvent(r, &runAudit{})
	proxyEvent(proxy.Event{Kind: proxy.EventRefused, Host: "github.com", Port: 443, Reason: "github.com is not in the allowlist"})
	proxyEvent(proxy.Event{Kind: proxy.EventRefused, Host: "2001:db8::5", Port: 443, Reason: "no entry covers it"})
	proxyEvent(proxy.Event{Kind: proxy.EventRefused, Host: "api.example.com", Port: 443, Reason: "api.example.com resolves only to addresses sluice refuses: 10.0.0.2 (DNS rebinding protection; ...)"})

	file := filepath.Join(t.TempDir(), "suggested.json")
	if err := r.suggest.write(file, base, &out); err != nil {
		t.Fatal(err)
	}
	got, err := allowlist.Load(file)
	if err != nil {
		t.Fatalf("the suggestion does not load: %v", err)
	}
	want := []string{"*.cdn.example", "198.51.100.0/24", "2001:db8::5", "203.0.113.7", "203.0.113.8",
		"api.example.com", "github.com", "intranet.example", "registry.npmjs.org"}
	slices.Sort(want)
	if g := entryStrings(got); !slices.Equal(g, want) {
		t.Errorf("suggested %v, want %v", g, want)
	}
	// The base's options survive.
	if e, ok := got.MatchName("intranet.example"); !ok || !e.AllowPrivate || !slices.Equal(e.Owners, []string{"team:a"}) {
		t.Errorf("intranet.example lost its options: %+v", e)
	}
	msg := out.String()
	for _, w := range []string{"added github.com registry.npmjs.org 203.0.113.7 203.0.113.8 2001:db8::5;", "answers for api.example.com held"} {
		if !strings.Contains(msg, w) {
			t.Errorf("output lacks %q:\n%s", w, msg)
		}
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode: %v %v", fi, err)
	}
}

// TestSuggestionBounded: a program making up names cannot grow the
// suggestion without end.
func TestSuggestionBounded(t *testing.T) {
	s := newSuggestion()
	for i := range maxSuggested + 50 {
		s.addName(fmt.Sprintf("n%d.example", i))
		s.addAddr(netip.AddrFrom4([4]byte{203, 0, byte(i >> 8), byte(i)}))
	}
	if n := len(s.names) + len(s.addrs); n > maxSuggested {
		t.Errorf("remembered %d, want at most %d", n, maxSuggested)
	}
	if s.beyond == 0 {
		t.Errorf("nothing counted as beyond the bound")
	}
}

// TestSuggestionNothingRefused: the file is still written (the base
// alone), so a script can rely on it.
func TestSuggestionNothingRefused(t *testing.T) {
	base, _ := allowlist.FromStrings([]string{"api.example.com"})
	var out bytes.Buffer
	file := filepath.Join(t.TempDir(), "s.json")
	if err := newSuggestion().write(file, base, &out); err != nil {
		t.Fatal(err)
	}
	got, err := allowlist.Load(file)
	if err != nil || !slices.Equal(entryStrings(got), []string{"api.example.com"}) {
		t.Errorf("got %v, %v", got, err)
	}
	if !strings.Contains(out.String(), "nothing added") {
		t.Errorf("output: %s", out.String())
	}
	if err := newSuggestion().write(filepath.Join(t.TempDir(), "missing", "s.json"), base, &out); err == nil {
		t.Errorf("writing into a missing directory succeeded")
	}
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

// TestSuggestionSearchExpansions: with Kubernetes' search list, a stub
// resolver asks for allowed and suggested names under every search
// domain first; those refusals are noise and are left out. A single-label
// name's expansion is what the program meant, and stays.
func TestSuggestionSearchExpansions(t *testing.T) {
	base, _ := allowlist.FromStrings([]string{"api.github.com"})
	s := newSuggestion()
	s.search = []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}
	for _, n := range []string{
		"api.github.com.default.svc.cluster.local", // the allowed name, expanded
		"api.github.com.cluster.local",
		"registry.npmjs.org",
		"registry.npmjs.org.svc.cluster.local", // a suggested name, expanded
		"db.corp.example",                      // "db" expanded: meant
		"other.example.corp.example",           // other.example was never asked for itself
	} {
		s.addName(n)
	}
	got := s.additions(base)
	want := []string{"db.corp.example", "other.example.corp.example", "registry.npmjs.org"}
	if !slices.Equal(got, want) {
		t.Errorf("additions %v, want %v", got, want)
	}
	var out bytes.Buffer
	merged, add, _ := s.render(base)
	s.explain(&out, "f", merged, add)
	if !strings.Contains(out.String(), "left out 3 names") {
		t.Errorf("explanation: %s", out.String())
	}
}

// TestSuggestionUnixSockets: refused unix sockets, from the kernel and
// from audit lines, become unix_sockets entries; listed ones and names an
// allowlist cannot hold do not.
func TestSuggestionUnixSockets(t *testing.T) {
	base, err := allowlist.Parse([]byte(`{"allowed_hosts": ["api.example.com"], "unix_sockets": ["/run/user/*/pulse/native"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := newReporter(&out)
	r.suggest.search = nil
	r.Report(audit.FromKernelBrief("", loader.Event{Hook: loader.HookUnixConnect, Reason: loader.ReasonNotAllowed, Unix: "/var/run/docker.sock", Audit: true}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Hook: loader.HookUnixSend, Reason: loader.ReasonNotAllowed, Unix: "@relay"}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Hook: loader.HookUnixConnect, Reason: loader.ReasonNotAllowed, Unix: "/run/user/1000/pulse/native"}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Hook: loader.HookUnixConnect, Reason: loader.ReasonNotAllowed, Unix: "relative.sock"}), nil)
	r.Report(daemonEvent("unix:/run/containerd/containerd.sock", "unix"), nil)
	file := filepath.Join(t.TempDir(), "suggested.json")
	if err := r.suggest.write(file, base, &out); err != nil {
		t.Fatal(err)
	}
	got, err := allowlist.Load(file)
	if err != nil {
		t.Fatalf("the suggestion does not load: %v", err)
	}
	want := []string{"/run/containerd/containerd.sock", "/run/user/*/pulse/native", "/var/run/docker.sock", "@relay"}
	if g := got.Local().UnixSockets; !slices.Equal(g, want) {
		t.Errorf("unix_sockets %v, want %v", g, want)
	}
	if !strings.Contains(out.String(), "unix:/var/run/docker.sock") {
		t.Errorf("output does not name the added socket:\n%s", out.String())
	}
}

func daemonEvent(dst, proto string) audit.Event {
	return audit.Event{Type: audit.EgressDenied, Dst: dst, Proto: proto, Reason: loader.ReasonNotAllowed.String(),
		Message: "denied x[1] -> " + dst + ": not in the allowlist"}
}
