// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/kaudit"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/namecheck"
	"github.com/sluice-dev/sluice/prompts"
	"github.com/sluice-dev/sluice/proxy"
)

const schemaPath = "../docs/audit.schema.json"

func loadSchema(t *testing.T) (*jsonschema.Schema, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaPath, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	return s, raw
}

// TestTypesMatchTheSchema holds the type constants to the documented
// list: a type added here but not in docs/audit.schema.json (or the other
// way round) fails.
func TestTypesMatchTheSchema(t *testing.T) {
	_, raw := loadSchema(t)
	var documented []string
	for _, v := range raw["properties"].(map[string]any)["type"].(map[string]any)["enum"].([]any) {
		documented = append(documented, v.(string))
	}
	got, want := slices.Sorted(slices.Values(Types)), slices.Sorted(slices.Values(documented))
	if !slices.Equal(got, want) {
		t.Errorf("audit.Types = %q\nschema enum = %q", got, want)
	}
}

// TestFieldsMatchTheSchema checks the JSON names of a fully set Event
// against the schema's properties (which allows no others).
func TestFieldsMatchTheSchema(t *testing.T) {
	_, raw := loadSchema(t)
	uid, exit := uint32(1000), 3
	b, err := json.Marshal(Event{Time: time.Now(), Type: EgressDenied, Session: "s", PID: 1, Comm: "c", Exe: "/e", UID: &uid,
		Dst: "203.0.113.1", Port: 443, Proto: "tcp", Host: "h.test", Reason: "r", Message: "m", Actor: &uid,
		Entries: []string{"x.test"}, Exit: &exit, Suppressed: 2, Access: "ptrace", Target: "bash[7]", TargetPID: 7,
		Prompt: "ab12cd34", Scope: "once", AnsweredBy: "user:alice", Job: map[string]string{"pod": "ci/runner"}})
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	props := raw["properties"].(map[string]any)
	for k := range fields {
		if _, ok := props[k]; !ok {
			t.Errorf("Event writes field %q, which docs/audit.schema.json does not have", k)
		}
	}
	for k := range props {
		if _, ok := fields[k]; !ok {
			t.Errorf("docs/audit.schema.json has field %q, which Event never writes", k)
		}
	}
}

// TestConvertedEventsValidate runs the converters on events of every kind
// their producers raise and validates the JSON lines against the schema.
func TestConvertedEventsValidate(t *testing.T) {
	schema, _ := loadSchema(t)
	addr := netip.MustParseAddr("203.0.113.7")
	var events []Event
	for _, audit := range []bool{false, true} {
		events = append(events,
			FromKernel("run-1", loader.Event{PID: 1 << 30, UID: 1000, Hook: loader.HookConnect4, Reason: loader.ReasonNotAllowed,
				Audit: audit, Addr: addr, Port: 443, Proto: 6, Comm: "curl"}, func(netip.Addr) []string { return []string{"a.test", "b.test"} }),
			FromKernel("run-1", loader.Event{PID: 1 << 30, UID: 1000, Hook: loader.HookSockCreate, Reason: loader.ReasonNotAllowed,
				Audit: audit, Args: [3]int32{2, 3, 1}, Comm: "ping"}, nil))
		for k := dnsresolver.EventRefused; k <= dnsresolver.EventUpstreamFailed; k++ {
			events = append(events, FromDNS("run-1", dnsresolver.Event{Kind: k, Audit: audit, Name: "x.test", QType: "A", Addr: addr,
				Reason: dnsresolver.ReasonNotAllowed}, "curl[42]"))
		}
	}
	for _, k := range []proxy.EventKind{proxy.EventRefused, proxy.EventRebinding} {
		e, ok := FromProxy("run-1", proxy.Event{Kind: k, Protocol: proxy.ProtoConnect, Host: "x.test", Port: 443, Addr: addr, Reason: "not allowed"})
		if !ok {
			t.Fatalf("FromProxy dropped a %v event", k)
		}
		events = append(events, e)
	}
	// A tunnel of the proxy whose SNI named another host.
	flight := namecheck.Flight{Proto: namecheck.ProtoTLS, Name: "evil.test"}
	e, ok := FromProxy("run-1", proxy.Event{Kind: proxy.EventRefused, Protocol: proxy.ProtoConnect, Host: "cdn.test", Port: 443, Addr: addr,
		Reason: "the address was allowed for cdn.test", Flight: &flight})
	if !ok || e.Type != NameRefused || e.Host != "evil.test" || e.Dst != addr.String() || e.Proto != "TLS SNI" || e.Port != 443 {
		t.Fatalf("FromProxy(name refused) = %+v, %v", e, ok)
	}
	events = append(events, e)
	events = append(events, SuppressedEvent("run-1", 5), SuppressedEvent("", 5),
		FromLandlock("run-1", kaudit.Denial{Blockers: []string{"ptrace"}, PID: 42, Comm: "gdb", Exe: "/usr/bin/gdb", Syscall: "pidfd_getfd",
			TargetPID: 7, TargetComm: "bash"}),
		FromLandlock("run-1", kaudit.Denial{Blockers: []string{"scope.signal"}, TargetPID: 7, TargetComm: "bash"}),
		FromLandlock("run-1", kaudit.Denial{Blockers: []string{"fs.make_block"}, Path: "/dev/x", PID: 42, Comm: "mknod"}))
	now := time.Now()
	for _, pe := range []prompts.Event{
		{Kind: prompts.Asked, Prompt: prompts.Prompt{ID: "ab12", Session: "run-1", Name: "new.test", Kind: prompts.KindName, AskedBy: "curl[42]", Asked: now, Expires: now.Add(time.Minute)}},
		{Kind: prompts.Granted, Prompt: prompts.Prompt{ID: "ab12", Session: "run-1", Name: "new.test"}, Answer: prompts.Answer{Allow: true, Scope: prompts.ForSession, By: "user:alice"}},
		{Kind: prompts.Denied, Prompt: prompts.Prompt{ID: "ab12", Session: "run-1", Name: "203.0.113.7", Kind: prompts.KindAddr}, Answer: prompts.Answer{By: "user:alice"}},
		{Kind: prompts.Denied, Prompt: prompts.Prompt{Session: "run-1", Name: "x.test"}, Reason: prompts.ErrCap.Error()},
		{Kind: prompts.TimedOut, Prompt: prompts.Prompt{ID: "ab12", Session: "run-1", Name: "new.test", Asked: now, Expires: now.Add(time.Minute)}},
	} {
		events = append(events, FromPrompt(pe))
	}
	for _, e := range events {
		if e.Time.IsZero() {
			e.Time = time.Now().UTC()
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(doc); err != nil {
			t.Errorf("%s does not match the schema: %v", b, err)
		}
	}
}

func TestFromLandlock(t *testing.T) {
	e := FromLandlock("run-1", kaudit.Denial{Blockers: []string{"ptrace"}, PID: 42, Comm: "gdb", Syscall: "ptrace", TargetPID: 7, TargetComm: "bash"})
	if e.Type != SandboxDenied || e.Access != "ptrace" || e.Target != "bash[7]" || e.TargetPID != 7 || e.PID != 42 ||
		e.Reason != "outside the session" || e.Message != "denied gdb[42] -> ptrace of bash[7]: outside the session" {
		t.Errorf("FromLandlock = %+v", e)
	}
	if e := FromLandlock("run-1", kaudit.Denial{Blockers: []string{"scope.signal"}, PID: 42, Comm: "kill", TargetPID: 7, TargetComm: "bash"}); e.Access != "signal" {
		t.Errorf("a signal refusal's access: %q", e.Access)
	}
}

func TestFromDNSTypes(t *testing.T) {
	for _, tc := range []struct {
		kind  dnsresolver.EventKind
		audit bool
		want  string
	}{
		{dnsresolver.EventRefused, false, DNSRefused},
		{dnsresolver.EventRefused, true, DNSAudit},
		{dnsresolver.EventRebinding, false, Rebinding},
		{dnsresolver.EventRebinding, true, RebindingAudit},
		{dnsresolver.EventCapReached, false, CapReached},
		{dnsresolver.EventMapFull, false, MapFull},
		{dnsresolver.EventUpstreamFailed, false, UpstreamFailed},
	} {
		e := FromDNS("s", dnsresolver.Event{Kind: tc.kind, Audit: tc.audit, Name: "n.test", Addr: netip.MustParseAddr("10.0.0.1")}, "")
		if e.Type != tc.want || e.Session != "s" || e.Host != "n.test" {
			t.Errorf("FromDNS(kind %d, audit %v) = %+v, want type %s for session s, host n.test", tc.kind, tc.audit, e, tc.want)
		}
		if (tc.kind == dnsresolver.EventRebinding) != (e.Dst != "") {
			t.Errorf("FromDNS(kind %d): dst %q: only a rebinding names the dropped address", tc.kind, e.Dst)
		}
	}
}

func TestFromKernel(t *testing.T) {
	ev := loader.Event{PID: 1 << 30, UID: 1000, Hook: loader.HookConnect6, Reason: loader.ReasonNotAllowed,
		Addr: netip.MustParseAddr("2001:db8::1"), Port: 443, Proto: 6, Comm: "curl"}
	e := FromKernel("run-1", ev, func(a netip.Addr) []string {
		if a != ev.Addr {
			t.Errorf("learnedFrom asked about %v, want %v", a, ev.Addr)
		}
		return []string{"a.test", "b.test"}
	})
	if e.Type != EgressDenied || e.Dst != "2001:db8::1" || e.Port != 443 || e.Proto != "tcp" || e.Host != "a.test,b.test" ||
		e.UID == nil || *e.UID != 1000 || e.Comm != "curl" || e.Reason != ev.Reason.String() {
		t.Errorf("FromKernel = %+v", e)
	}
	// The pid cannot exist: no exe may be pinned on the session.
	if e.Exe != "" {
		t.Errorf("exe %q for a process that does not exist", e.Exe)
	}
	ev.Audit = true
	if e := FromKernel("run-1", ev, nil); e.Type != EgressAudit || e.Host != "" {
		t.Errorf("audit-mode FromKernel = %+v, want %s without a host", e, EgressAudit)
	}
}

// Only decisions become audit lines: a failure to reach an allowed host
// or a malformed request is the client's business.
func TestFromProxyKeepsOnlyDecisions(t *testing.T) {
	for _, k := range []proxy.EventKind{proxy.EventMalformed, proxy.EventFailed} {
		if e, ok := FromProxy("s", proxy.Event{Kind: k, Host: "x.test", Port: 80}); ok {
			t.Errorf("FromProxy(%v) = %+v, want no audit line", k, e)
		}
	}
	e, ok := FromProxy("s", proxy.Event{Kind: proxy.EventRebinding, Host: "x.test", Port: 80, Addr: netip.MustParseAddr("10.1.2.3")})
	if !ok || e.Type != Rebinding || e.Dst != "10.1.2.3" {
		t.Errorf("FromProxy(rebinding) = %+v, %v", e, ok)
	}
}

func TestLogWritesLinesAndReopens(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/audit.jsonl"
	l, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	l.Write(Event{Type: SessionEnded, Session: "s", Message: "one"})
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Write(Event{Type: SessionEnded, Session: "s", Message: "two"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{path + ".1": "one", path: "two"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var e Event
		if err := json.Unmarshal(b, &e); err != nil || e.Message != want || e.Time.IsZero() {
			t.Errorf("%s = %q (%v), want one line %q with a time", file, b, err, want)
		}
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", file, fi.Mode().Perm())
		}
	}
	off, err := OpenLog("")
	if err != nil {
		t.Fatal(err)
	}
	off.Write(Event{Type: SessionEnded}) // writes nothing, and must not fail
}
