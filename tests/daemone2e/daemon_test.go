// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

func TestRunThroughDaemon(t *testing.T) {
	f := newFixture(t, "allowed.test", "203.0.113.10")
	// Positive twin: allowed by name (learned through the daemon's
	// resolver) and by IP.
	if r := f.probe(t, nil, "resolve-tcp", "allowed.test", fmt.Sprint(f.port)); !r.OK {
		t.Fatalf("allowed name through the daemon: %s", r)
	}
	clientLog := filepath.Join(f.dir, "client-audit.jsonl")
	out, stderr, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--audit-log", clientLog, "--", world.BuildProbe(t), "tcp", world.DeniedV4.String(), fmt.Sprint(f.denied))
	r, _ := world.ParseProbeResult([]byte(out))
	if r.OK || r.Errno != "EPERM" || code != 1 {
		t.Fatalf("denied host: %s (exit %d)", r, code)
	}
	if !strings.Contains(stderr, "denied probe[") || !strings.Contains(stderr, "203.0.113.20:"+fmt.Sprint(f.denied)+"/tcp: not in the allowlist") {
		t.Fatalf("the denial line did not reach the client:\n%s", stderr)
	}
	f.w.AssertNothingArrived(t, world.To(world.DeniedV4), 200*time.Millisecond)
	e := f.waitAudit(t, "egress_denied", nil)
	if e["comm"] != "probe" || e["dst"] != "203.0.113.20" || e["proto"] != "tcp" || e["uid"] != float64(65534) {
		t.Fatalf("egress_denied audit line lacks who/where: %v", e)
	}
	// The client's own --audit-log has the session's story too.
	var types []string
	for _, e := range world.ReadAuditLog(t, clientLog) {
		types = append(types, e["type"].(string))
	}
	if len(types) != 3 || types[0] != "session_started" || types[1] != "egress_denied" || types[2] != "session_ended" {
		t.Errorf("client audit log: %v", types)
	}
	// Exit status passes through.
	if _, _, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", "exit 7"); code != 7 {
		t.Fatalf("exit status: %d", code)
	}
}

func TestAPIRejectsBadInput(t *testing.T) {
	f := newFixture(t, "allowed.test", "203.0.113.0/24")
	before, _ := os.ReadFile(f.allow)
	cases := []struct {
		name, method, path, body string
		code                     int
		msg                      string
	}{
		{"malformed JSON", "POST", "/v1/sessions", `{"argv": [`, 400, "malformed request"},
		{"unknown field", "POST", "/v1/sessions", `{"argv": ["true"], "allow_everything": true}`, 400, "unknown field"},
		{"trailing data", "POST", "/v1/sessions", `{"argv": ["true"]} {}`, 400, "trailing data"},
		{"no command", "POST", "/v1/sessions", `{"argv": []}`, 400, "a command is required"},
		{"invalid host", "POST", "/v1/sessions", `{"argv": ["/bin/true"], "allow": ["https://x.example/"], "user": "65534"}`, 400, `"https://x.example/"`},
		{"widening", "POST", "/v1/sessions", `{"argv": ["/bin/true"], "allow": ["evil.example", "198.51.100.0/24"], "user": "65534"}`, 403, "evil.example"},
		{"no descriptors", "POST", "/v1/sessions", `{"argv": ["/bin/true"], "user": "65534"}`, 400, "descriptors"},
		{"10 MB body", "POST", "/v1/sessions", `{"argv": ["` + strings.Repeat("a", 10<<20) + `"]}`, 413, "larger than"},
		{"bad allow entry", "POST", "/v1/allowlist", `{"entries": ["*"]}`, 400, `"*"`},
		{"empty allow", "POST", "/v1/allowlist", `{"entries": []}`, 400, "nothing to allow"},
		{"unknown session", "DELETE", "/v1/sessions/nope", ``, 404, "no session"},
		{"bad signal", "POST", "/v1/sessions/nope/signal", `{"signal": "TERM"}`, 404, "no session"},
		{"revoke unknown", "POST", "/v1/allowlist/revoke", `{"owner": "nobody"}`, 404, "no entry is owned"},
	}
	for _, c := range cases {
		code, body := f.api(t, c.method, c.path, []byte(c.body))
		var e struct{ Error string }
		if code != c.code || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, c.msg) {
			t.Errorf("%s: got %d %.300s, want %d with %q", c.name, code, body, c.code, c.msg)
		}
	}
	code, body := f.api(t, "GET", "/v1/sessions", nil)
	if code != 200 || strings.TrimSpace(body) != "[]" {
		t.Fatalf("bad requests left sessions behind: %d %s", code, body)
	}
	if after, _ := os.ReadFile(f.allow); string(after) != string(before) {
		t.Fatalf("bad requests changed the allowlist:\n%s", after)
	}
}

func TestUnprivilegedClients(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	// uid 65534 (gid 65534 = the session group) starts a session.
	marker := filepath.Join(f.dir, "started")
	go f.sluice(t, 65534, 65534, "run", "--", "sh", "-c", "echo $SLUICE_SESSION > "+marker+"; sleep 30")
	session := strings.TrimSpace(string(waitFile(t, marker)))

	// Another member of the group sees nothing of it and cannot kill it.
	out, _, code := f.sluice(t, 65532, 65534, "sessions")
	if code != 0 || strings.Contains(out, session) {
		t.Fatalf("uid 65532 sees another user's session: %s", out)
	}
	if _, stderr, code := f.sluice(t, 65532, 65534, "sessions", "kill", session); code == 0 || !strings.Contains(stderr, "no session") {
		t.Fatalf("uid 65532 killed another user's session (exit %d): %s", code, stderr)
	}
	// Widening and running as someone else are refused.
	if _, stderr, code := f.sluice(t, 65532, 65534, "run", "--allow", "198.51.100.7", "--", "true"); code == 0 || !strings.Contains(stderr, "198.51.100.7") {
		t.Fatalf("a session widened the machine allowlist (exit %d): %s", code, stderr)
	}
	if _, stderr, code := f.sluice(t, 65532, 65534, "run", "--user", "65534", "--", "true"); code == 0 || !strings.Contains(stderr, "only root") {
		t.Fatalf("uid 65532 ran a command as another user (exit %d): %s", code, stderr)
	}
	if _, stderr, code := f.sluice(t, 65532, 65534, "allow", "evil.example"); code == 0 || !strings.Contains(stderr, "needs root") {
		t.Fatalf("uid 65532 changed the machine allowlist (exit %d): %s", code, stderr)
	}
	// Not in the group: no sessions at all (the socket refuses it:
	// TestSocketOnlyForTheGroup; the daemon's own refusal is tested there
	// with --socket-mode 0666).
	if _, stderr, code := f.sluice(t, 65533, 65533, "run", "--", "true"); code == 0 || !strings.Contains(stderr, "permission denied") {
		t.Fatalf("a user outside the group created a session (exit %d): %s", code, stderr)
	}
	// In the group as a supplementary group only (SO_PEERGROUPS).
	if _, stderr, code := f.sluiceGroups(t, f.w.StartInClient, 65533, 65533, []uint32{65534}, "run", "--", "true"); code != 0 {
		t.Fatalf("a member of the session group through a supplementary group was refused (exit %d): %s", code, stderr)
	}
	// The owner sees its session, running as itself, and can kill it.
	out, _, _ = f.sluice(t, 65534, 65534, "sessions")
	if !strings.Contains(out, session) {
		t.Fatalf("the owner does not see its session: %s", out)
	}
	out, _, _ = f.sluice(t, 65534, 65534, "sessions", "show", session)
	var info struct {
		UID    uint32   `json:"uid"`
		Policy []string `json:"policy"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.UID != 65534 || len(info.Policy) != 1 {
		t.Fatalf("sessions show: %v %s", err, out)
	}
	if _, _, code := f.sluice(t, 65534, 65534, "sessions", "kill", session); code != 0 {
		t.Fatal("the owner could not kill its session")
	}
	f.waitAudit(t, "session_ended", func(e map[string]any) bool { return e["session"] == session })
}

func TestCrashKeepsSessionsConfined(t *testing.T) {
	f := newFixture(t, "allowed.test", "allowed2.test")
	probe := world.BuildProbe(t)
	d := f.dir
	script := fmt.Sprintf(`
%[1]s resolve-tcp allowed.test %[2]d > %[3]s/1.tmp; mv %[3]s/1.tmp %[3]s/1
while [ ! -e %[3]s/go1 ]; do sleep 0.05; done
%[1]s tcp 203.0.113.20 %[4]d > %[3]s/2.tmp; mv %[3]s/2.tmp %[3]s/2
%[1]s -timeout 1s resolve allowed2.test > %[3]s/3.tmp; mv %[3]s/3.tmp %[3]s/3
while [ ! -e %[3]s/go2 ]; do sleep 0.05; done
%[1]s resolve-tcp allowed2.test %[2]d > %[3]s/4.tmp; mv %[3]s/4.tmp %[3]s/4
`, probe, f.port, d, f.denied)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
	}()
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/1")); !r.OK {
		t.Fatalf("before the crash: %s", r)
	}
	f.stopDaemon(t) // kill -9
	if err := os.WriteFile(d+"/go1", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/2")); r.OK || r.Errno != "EPERM" {
		t.Fatalf("with the daemon dead the session reached a denied host: %s", r)
	}
	f.w.AssertNothingArrived(t, world.To(world.DeniedV4), 200*time.Millisecond)
	// On the resolver path, a name not yet learned cannot resolve with
	// the daemon dead; on the kernel path it must (TestKernelDNSSurvivesRestart).
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/3")); r.OK != f.kernelDNS() {
		t.Fatalf("a name not yet learned, with the daemon dead (kernel DNS path: %v): %s", f.kernelDNS(), r)
	}
	// A process outside the session is not affected.
	if r := f.w.RunProbe(t, nil, "tcp", world.DeniedV4.String(), fmt.Sprint(f.denied)); !r.OK {
		t.Fatalf("outside the session: %s", r)
	}

	f.startDaemon(t)
	f.waitAudit(t, "session_adopted", nil)
	out, _, _ := f.sluice(t, 0, 0, "sessions")
	if !strings.Contains(out, "run-") {
		t.Fatalf("the re-adopted session is not listed: %s", out)
	}
	if err := os.WriteFile(d+"/go2", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/4")); !r.OK {
		t.Fatalf("after the restart names resolve again: %s", r)
	}
	f.waitAudit(t, "session_ended", nil)
	<-done
	// Continuity: the audit log tells the whole story in order.
	var types []string
	for _, e := range f.auditEvents(t) {
		types = append(types, e["type"].(string))
	}
	got := strings.Join(types, " ")
	if !regexp.MustCompile(`daemon_started .*session_started .*daemon_started .*session_adopted .*session_ended`).MatchString(got) {
		t.Fatalf("audit log out of order: %s", got)
	}
}

func TestAllowlistReload(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	probe := world.BuildProbe(t)
	d := f.dir
	script := fmt.Sprintf(`
%[1]s tcp 203.0.113.20 %[2]d > %[3]s/a.tmp; mv %[3]s/a.tmp %[3]s/a
while [ ! -e %[3]s/go ]; do sleep 0.05; done
%[1]s tcp 203.0.113.20 %[2]d > %[3]s/b.tmp; mv %[3]s/b.tmp %[3]s/b
while [ ! -e %[3]s/go2 ]; do sleep 0.05; done
%[1]s tcp 203.0.113.20 %[2]d > %[3]s/c.tmp; mv %[3]s/c.tmp %[3]s/c
`, probe, f.denied, d)
	go f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/a")); r.OK {
		t.Fatalf("before the change: %s", r)
	}
	// A valid change applies to the running session at once.
	f.writeAllowlist(t, "203.0.113.10", "203.0.113.20")
	f.waitAudit(t, "policy_changed", func(e map[string]any) bool { return strings.Contains(fmt.Sprint(e["entries"]), "203.0.113.20") })
	_ = os.WriteFile(d+"/go", nil, 0o644)
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/b")); !r.OK {
		t.Fatalf("after a valid change: %s", r)
	}
	// An invalid file is reported with the entry at fault; the last good
	// policy stays.
	f.writeFile(t, f.allow, []byte("{\"allowed_hosts\": [\n  \"203.0.113.10\",\n  \"https://bad.example/\"\n]}"))
	e := f.waitAudit(t, "policy_invalid", nil)
	if !strings.Contains(e["reason"].(string), "line 3") || !strings.Contains(e["reason"].(string), "https://bad.example/") {
		t.Fatalf("policy_invalid does not name the line and entry: %v", e)
	}
	_ = os.WriteFile(d+"/go2", nil, 0o644)
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/c")); !r.OK {
		t.Fatalf("an invalid file changed the policy in force: %s", r)
	}
}

func TestOwnersAndRevoke(t *testing.T) {
	f := newFixture(t)
	if _, _, code := f.sluice(t, 0, 0, "allow", "--owner", "provider:a", "a.example", "shared.example"); code != 0 {
		t.Fatal("allow a")
	}
	if _, _, code := f.sluice(t, 0, 0, "allow", "--owner", "provider:b", "shared.example"); code != 0 {
		t.Fatal("allow b")
	}
	out, _, code := f.sluice(t, 0, 0, "revoke", "provider:a")
	if code != 0 || !strings.Contains(out, "removed a.example") || !strings.Contains(out, "kept shared.example") {
		t.Fatalf("revoke: %s", out)
	}
	b, _ := os.ReadFile(f.allow)
	if strings.Contains(string(b), "a.example\"") && !strings.Contains(string(b), "shared.example") {
		t.Fatalf("allowlist after revoke:\n%s", b)
	}
	if strings.Contains(string(b), `"a.example"`) {
		t.Fatalf("a.example survived its owner's revoke:\n%s", b)
	}
	e := f.waitAudit(t, "policy_changed", func(e map[string]any) bool { return strings.Contains(e["message"].(string), "revoke provider:a") })
	if e["actor_uid"] != float64(0) {
		t.Fatalf("policy change without its actor: %v", e)
	}
	if _, _, code := f.sluice(t, 0, 0, "deny", "shared.example"); code != 0 {
		t.Fatal("deny")
	}
	if b, _ := os.ReadFile(f.allow); strings.Contains(string(b), "shared.example") {
		t.Fatalf("deny left the entry:\n%s", b)
	}
}

// scrapeMetrics reads the daemon's /metrics.
func (f *fixture) scrapeMetrics(t *testing.T) string {
	t.Helper()
	var body string
	err := f.w.InClient(func() error {
		c, err := net.DialTimeout("tcp", metricsAddr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufioReader(c), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err
	})
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return body
}

// dnsQueriesMetric is sluice_dns_queries_total{verdict=...} in body, -1
// when there is no such series.
func dnsQueriesMetric(body, verdict string) int {
	m := regexp.MustCompile(`(?m)^sluice_dns_queries_total\{verdict="` + regexp.QuoteMeta(verdict) + `"\} (\d+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestKernelDNSQueriesCounted: on the kernel DNS path the kernel judges
// and forwards a session's queries itself, and the daemon's DNS metrics
// count them (verdict="kernel"): ten fresh allowed names, each asked A
// and AAAA by the Go resolver, make the counter grow by at least ten,
// while the upstream saw every name (the twin: they did go out).
func TestKernelDNSQueriesCounted(t *testing.T) {
	f := newFixtureFlags(t, []string{"--dns-path", "kernel"}, "*.fresh.test")
	probe := world.BuildProbe(t)
	before := f.scrapeMetrics(t)
	k0 := dnsQueriesMetric(before, "kernel")
	if k0 < 0 {
		t.Fatalf("no sluice_dns_queries_total{verdict=\"kernel\"} on the kernel DNS path:\n%s", before)
	}
	fwd0 := dnsQueriesMetric(before, "forwarded")
	d := f.dir
	script := fmt.Sprintf(`ok=0; for i in 1 2 3 4 5 6 7 8 9 10; do %[1]s -timeout 2s resolve m$i-$$.fresh.test | grep -q '"ok":true' && ok=$((ok+1)); done; echo "ok=$ok" > %[2]s/r.tmp; mv %[2]s/r.tmp %[2]s/result`, probe, d)
	f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
	if res := string(waitFile(t, d+"/result")); !strings.HasPrefix(res, "ok=10") {
		t.Fatalf("lookups on the kernel path: %s", res)
	}
	for i := 1; i <= 10; i++ {
		if !f.dns.Saw(fmt.Sprintf("m%d-", i)) {
			t.Fatalf("the upstream never saw m%d-*.fresh.test", i)
		}
	}
	after := f.scrapeMetrics(t)
	k1, fwd1 := dnsQueriesMetric(after, "kernel"), dnsQueriesMetric(after, "forwarded")
	if k1-k0 < 10 {
		t.Fatalf("sluice_dns_queries_total{verdict=\"kernel\"} grew by %d after 10 lookups on the kernel path (%d -> %d); forwarded by the resolver: %d -> %d", k1-k0, k0, k1, fwd0, fwd1)
	}
	if fwd1-fwd0 >= 10 {
		t.Errorf("the resolver forwarded %d queries of lookups the kernel path should have taken", fwd1-fwd0)
	}
}

func TestMetricsMoveOnDenial(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	scrape := func() string { return f.scrapeMetrics(t) }
	probe := world.BuildProbe(t)
	d := f.dir
	// Two denials in the kernel, one by the session's proxy, and glibc
	// lookups, which try the nscd socket first: quiet refusals, which
	// must not count as denials.
	script := fmt.Sprintf(`%[1]s tcp 203.0.113.20 %[2]d; %[1]s tcp 203.0.113.20 %[2]d; %[1]s proxy-connect 203.0.113.20 %[2]d; getent passwd root >/dev/null; getent hosts localhost >/dev/null; echo > %[3]s/done; sleep 5`, probe, f.denied, d)
	go f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
	waitFile(t, d+"/done")
	body := scrape()
	re := regexp.MustCompile(`sluice_connections_total\{session="[^"]+",verdict="denied"\} (\d+)`)
	m := re.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no per-session denied counter:\n%s", body)
	}
	if n, _ := strconv.Atoi(m[1]); n != 2 {
		t.Fatalf("denied counter %d after 2 denials and 2 glibc lookups (the lookups' nscd refusals are not denials):\n%s", n, body)
	}
	qm := regexp.MustCompile(`sluice_quiet_refusals_total\{session="[^"]+"\} (\d+)`).FindStringSubmatch(body)
	if qm == nil {
		t.Fatalf("no per-session quiet refusal counter:\n%s", body)
	}
	// Only where the kernel judges unix sockets does anything refuse nscd.
	if n, _ := strconv.Atoi(qm[1]); n < 2 && loader.ProbeUnix() == nil {
		t.Errorf("quiet refusals %d after 2 glibc lookups, want at least 2 (one nscd try each)", n)
	}
	pm := regexp.MustCompile(`sluice_proxy_requests_total\{protocol="connect",session="[^"]+",verdict="refused"\} (\d+)`).FindStringSubmatch(body)
	if pm == nil || pm[1] != "1" {
		t.Errorf("proxy refusal counter %v after one refused CONNECT:\n%s", pm, body)
	}
	for _, name := range []string{"sluice_sessions 1", "sluice_dns_queries_total", "sluice_audit_events_total{type=\"egress_denied\"}", "sluice_audit_events_total{type=\"proxy_refused\"}", "sluice_learned_map_fill_ratio", "sluice_proxy_active_connections", "sluice_proxy_bytes_total"} {
		if !strings.Contains(body, name) {
			t.Errorf("metrics lack %s", name)
		}
	}
}

func TestConfinedCallerCannotWiden(t *testing.T) {
	f := newFixture(t, "203.0.113.10", "203.0.113.20")
	probe := world.BuildProbe(t)
	d := f.dir
	// The session may reach AllowedV4 only; from inside, it asks the
	// daemon (whose socket it can reach: unix sockets are not filtered)
	// for more.
	script := fmt.Sprintf(`
%[1]s --socket %[2]s run --allow 203.0.113.20 -- true 2> %[3]s/widen.err; echo $? > %[3]s/widen.code
%[1]s --socket %[2]s run -- %[4]s tcp 203.0.113.20 %[5]d > %[3]s/nested.tmp; mv %[3]s/nested.tmp %[3]s/nested
%[1]s --socket %[2]s run -- %[4]s tcp 203.0.113.10 %[6]d > %[3]s/twin.tmp; mv %[3]s/twin.tmp %[3]s/twin
`, sluiceBin, f.sock, d, probe, f.denied, f.port)
	f.sluice(t, 65534, 65534, "run", "--allow", "203.0.113.10", "--", "sh", "-c", script)
	code, _ := os.ReadFile(d + "/widen.code")
	msg, _ := os.ReadFile(d + "/widen.err")
	if strings.TrimSpace(string(code)) != "125" || !strings.Contains(string(msg), "may only narrow its own session's policy") {
		t.Fatalf("a confined process widened its policy through the daemon: exit %s: %s", code, msg)
	}
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/nested")); r.OK || r.Errno != "EPERM" {
		t.Fatalf("a nested session got more than its parent: %s", r)
	}
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/twin")); !r.OK {
		t.Fatalf("positive twin: the nested session reaches what its parent may: %s", r)
	}
	f.w.AssertNothingArrived(t, world.To(world.DeniedV4), 200*time.Millisecond)
	if _, stderr, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--",
		sluiceBin, "--socket", f.sock, "allow", "evil.example"); code == 0 || !strings.Contains(stderr, "needs root") {
		t.Fatalf("allowlist change from inside a session: exit %d %s", code, stderr)
	}
}

// TestConfinedAdminCannotChangeAllowlist: a member of the admin group may
// change the machine allowlist, but not from inside a session: an agent
// running as that user would otherwise open any host for itself.
func TestConfinedAdminCannotChangeAllowlist(t *testing.T) {
	f := newFixtureFlags(t, []string{"--admin-group", "65534"}, "203.0.113.10")
	d := f.dir
	script := fmt.Sprintf(`%[1]s --socket %[2]s allow 203.0.113.20 2> %[3]s/allow.err; echo $? > %[3]s/allow.tmp; mv %[3]s/allow.tmp %[3]s/allow.code`,
		sluiceBin, f.sock, d)
	f.sluice(t, 65534, 65534, "run", "--", "sh", "-c", script)
	code := strings.TrimSpace(string(waitFile(t, d+"/allow.code")))
	msg, _ := os.ReadFile(d + "/allow.err")
	if code == "0" || !strings.Contains(string(msg), "cannot be changed from inside a sluice session") {
		t.Fatalf("an admin inside a session changed the machine allowlist: exit %s: %s", code, msg)
	}
	if _, body := f.api(t, "GET", "/v1/allowlist", nil); strings.Contains(body, "203.0.113.20") {
		t.Fatalf("the refused change reached the machine allowlist: %s", body)
	}
	f.waitAudit(t, "policy_change_refused", func(e map[string]any) bool {
		return e["actor_uid"] == float64(65534) && strings.Contains(fmt.Sprint(e["reason"]), "inside a sluice session")
	})
	// The positive twin: the same user, outside a session, may.
	if _, stderr, code := f.sluice(t, 65534, 65534, "allow", "203.0.113.20"); code != 0 {
		t.Fatalf("an admin outside a session could not change the allowlist: exit %d %s", code, stderr)
	}
	if _, body := f.api(t, "GET", "/v1/allowlist", nil); !strings.Contains(body, "203.0.113.20") {
		t.Fatalf("the admin's change is not in the machine allowlist: %s", body)
	}
}

func TestAllowlistFileThroughDaemon(t *testing.T) {
	f := newFixture(t, "203.0.113.10", "203.0.113.20")
	file := filepath.Join(f.dir, "session.json")
	f.writeFile(t, file, []byte(`{"allowed_hosts": [{"host": "203.0.113.20", "owner": "test"}]}`))
	// The file narrows the session to DeniedV4 only: AllowedV4 is refused.
	r := f.probe(t, []string{"--allowlist", file}, "tcp", world.AllowedV4.String(), fmt.Sprint(f.port))
	if r.OK || r.Errno != "EPERM" {
		t.Fatalf("a session narrowed by its file reached another host: %s", r)
	}
	if r := f.probe(t, []string{"--allowlist", file}, "tcp", world.DeniedV4.String(), fmt.Sprint(f.denied)); !r.OK {
		t.Fatalf("positive twin: the file's own entry: %s", r)
	}
	bad := filepath.Join(f.dir, "bad.json")
	f.writeFile(t, bad, []byte(`{"allowed_hosts": [{"host": "rebind.example", "allow_private": true}]}`))
	if _, stderr, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--allowlist", bad, "--", "true"); code == 0 || !strings.Contains(stderr, "rebind.example") {
		t.Fatalf("a file widening the machine allowlist: exit %d %s", code, stderr)
	}
}

// TestCallersElsewhereRefused: the daemon starts a command in its own
// network namespace and on its own root file system, so a caller that can
// reach the socket from another one (a container with /run/sluice mounted)
// is refused, not handed the daemon's. The twin is the same call from the
// daemon's namespace.
func TestCallersElsewhereRefused(t *testing.T) {
	f := newFixture(t)
	probe := world.BuildProbe(t)
	run := func(t *testing.T, start func(*exec.Cmd) error, path string, args ...string) world.ProbeResult {
		t.Helper()
		c := exec.Command(path, args...)
		c.SysProcAttr = &syscall.SysProcAttr{}
		var out bytes.Buffer
		c.Stdout = &out
		if err := start(c); err != nil {
			t.Fatalf("start %s: %v", path, err)
		}
		_ = c.Wait()
		r, err := world.ParseProbeResult(out.Bytes())
		if err != nil {
			t.Fatalf("daemon-run: %v", err)
		}
		t.Logf("daemon-run -> %s", r.Line)
		return r
	}
	if r := run(t, f.w.StartInClient, probe, "daemon-run", f.sock, "/bin/true"); !r.OK {
		t.Fatalf("twin from the daemon's namespace: %s", r)
	}
	if r := run(t, (*exec.Cmd).Start, probe, "daemon-run", f.sock, "/bin/true"); r.OK || !strings.Contains(r.Error, "another network namespace") {
		t.Errorf("caller in another network namespace: %s", r)
	}

	// A chroot holding only the (static) probe and a link to the socket.
	root := t.TempDir()
	b, err := os.ReadFile(probe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "probe"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(f.sock, filepath.Join(root, "s")); err != nil {
		needs.Skip(t, "cannot link the socket into the chroot (TMPDIR on one file system): %v", err)
	}
	chrooted := func(c *exec.Cmd) error {
		c.SysProcAttr.Chroot = root
		return f.w.StartInClient(c)
	}
	if r := run(t, chrooted, "/probe", "daemon-run", "/s", "/bin/true"); r.OK || !strings.Contains(r.Error, "another root file system") {
		t.Errorf("caller in a chroot: %s", r)
	}
	for _, what := range []string{"another network namespace", "another root file system"} {
		f.waitAudit(t, "session_refused", func(e map[string]any) bool {
			r, _ := e["reason"].(string)
			return strings.Contains(r, what) && e["actor_uid"] == float64(0)
		})
	}
}

// TestDenialFloodIsRateLimited: a session that makes thousands of denials
// in a moment gets at most the burst written, and events_suppressed lines
// account for the rest; the kernel still refuses every one.
//
// When the kernel's event ring drops so many that the limit is never
// reached, a fresh daemon tries again under SLUICE_REQUIRE_KERNEL=1, and the
// test fails if it never is (package needs).
func TestDenialFloodIsRateLimited(t *testing.T) {
	for attempt := 1; ; attempt++ {
		reached, got := denialFlood(t)
		if reached {
			return
		}
		if attempt >= needs.Attempts() {
			needs.Enough(t, attempt, "only %d of 3000 denials reached sluice: the rate limit was not exercised", got)
			return
		}
	}
}

// denialFlood runs one flood of 3000 denials in a fresh daemon and checks
// the log, if enough denials reached sluice to exercise the limit.
func denialFlood(t *testing.T) (reached bool, got int) {
	f := newFixture(t, "203.0.113.10")
	defer f.stopDaemon(t)
	const n = 3000
	script := fmt.Sprintf(`for i in $(seq %d); do : 2>/dev/null >/dev/tcp/203.0.113.20/%d; done; true`, n, f.denied)
	start := time.Now()
	if _, _, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "bash", "-c", script); code != 0 {
		t.Fatalf("flood script exit %d", code)
	}
	elapsed := time.Since(start)
	f.w.AssertNothingArrived(t, world.To(world.DeniedV4), 200*time.Millisecond)
	end := f.waitAudit(t, "session_ended", nil)
	session := end["session"]
	written, suppressed := 0, 0
	for _, e := range f.auditEvents(t) {
		if e["session"] != session {
			continue
		}
		switch e["type"] {
		case "egress_denied":
			written++
		case "events_suppressed":
			suppressed += int(e["suppressed"].(float64))
		}
	}
	t.Logf("%d denials in %v: %d written, %d suppressed", n, elapsed, written, suppressed)
	most := 1000 + int(100*elapsed.Seconds()) + 10
	if written+suppressed <= most {
		// The kernel's event ring (its losses are counted, not
		// reported here) dropped so many that the limit was never reached.
		return false, written + suppressed
	}
	if written > most || suppressed == 0 || written+suppressed > n {
		t.Errorf("written %d + suppressed %d of %d denials: want at most %d written and the rest counted as suppressed", written, suppressed, n, most)
	}
	return true, written + suppressed
}

// TestRefusalFloodIsRateLimited: refused API requests are written within
// the same limit as a session's denials, so an agent repeating one in a
// loop cannot fill the disk, and every refusal is either written or
// counted in a sessionless events_suppressed line.
//
// When the requests come too slowly to exceed the limit, a fresh daemon
// tries again under SLUICE_REQUIRE_KERNEL=1, and the test fails if they
// never do (package needs).
func TestRefusalFloodIsRateLimited(t *testing.T) {
	for attempt := 1; ; attempt++ {
		elapsed, fast := refusalFlood(t)
		if fast {
			return
		}
		if attempt >= needs.Attempts() {
			needs.Enough(t, attempt, "the requests took %v: too slow to exceed the rate limit", elapsed)
			return
		}
	}
}

// refusalFlood sends one flood of refused requests to a fresh daemon and
// checks the log, if they came fast enough to exceed the limit.
func refusalFlood(t *testing.T) (time.Duration, bool) {
	f := newFixture(t, "203.0.113.10")
	defer f.stopDaemon(t)
	const n = 3000
	// Beyond the machine allowlist: 403 before any descriptor is needed.
	body := []byte(`{"argv": ["/bin/true"], "user": "65534:65534", "allow": ["198.51.100.99"]}`)
	start := time.Now()
	for i := range n + 1 {
		if i == n {
			// Tokens come back at 100 a second, and the count is
			// reported with the next line written after a second.
			time.Sleep(1100 * time.Millisecond)
		}
		if code, resp := f.api(t, "POST", "/v1/sessions", body); code != http.StatusForbidden {
			t.Fatalf("request %d: %d %s, want 403", i, code, resp)
		}
	}
	elapsed := time.Since(start)
	written, suppressed := 0, 0
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		written, suppressed = 0, 0
		for _, e := range f.auditEvents(t) {
			switch {
			case e["type"] == "session_refused":
				written++
			case e["type"] == "events_suppressed" && e["session"] == nil:
				suppressed += int(e["suppressed"].(float64))
			}
		}
		if written+suppressed >= n+1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d refusals in %v: %d written, %d suppressed", n+1, elapsed, written, suppressed)
	most := 1000 + int(100*elapsed.Seconds()) + 10
	if most >= n {
		return elapsed, false
	}
	if suppressed == 0 || written+suppressed != n+1 || written > most {
		t.Fatalf("written %d + suppressed %d of %d refusals: want at most %d written and every refusal accounted for", written, suppressed, n+1, most)
	}
	return elapsed, true
}

// TestConfinedCallerSeesOnlyItsOwnSessions: an agent can reach the API
// socket with its user's rights, but it sees, signals and kills only its
// own session and the sessions created from inside it, not its user's
// other sessions. The twin is the same user outside any session.
func TestConfinedCallerSeesOnlyItsOwnSessions(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	probe := world.BuildProbe(t)
	d := f.dir
	s := fmt.Sprintf("%s --socket %s", sluiceBin, f.sock)
	denied := fmt.Sprintf("%s tcp 203.0.113.20 %d > /dev/null", probe, f.denied)
	// Every wait is bounded: 10 s, and 60 s for the sessions that must
	// outlive the agent's whole script (waitlong).
	const waitfor = `waitfor() { i=0; while [ ! -e "$1" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; }` + "\n" +
		`waitlong() { i=0; while [ ! -e "$1" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; }` + "\n"
	write := func(name, script string) string {
		f.writeFile(t, filepath.Join(d, name), []byte(waitfor+script))
		return filepath.Join(d, name)
	}
	// The sibling: another session of the same user, alive until "stop",
	// that makes one denial when told to.
	sibScript := write("sib.sh", fmt.Sprintf(`echo $SLUICE_SESSION > %[1]s/sib.tmp; mv %[1]s/sib.tmp %[1]s/sib.name
waitfor %[1]s/sib.deny; %[2]s; touch %[1]s/sib.denied
waitlong %[1]s/stop`, d, denied))
	sibling := make(chan struct{})
	go func() {
		defer close(sibling)
		f.sluice(t, 65534, 65534, "run", "--", "sh", sibScript)
	}()
	t.Cleanup(func() {
		_ = os.WriteFile(d+"/stop", nil, 0o644)
		<-sibling
	})
	sib := strings.TrimSpace(string(waitFile(t, d+"/sib.name")))

	// The agent lists, tries to show and kill the sibling, watches the
	// events and starts a nested session, which lists too and makes two
	// denials around the sibling's one; while the nested session runs,
	// the agent lists again (its descendants are its own). Scripts run
	// from files: `sluice sessions` prints argv, which must fit a line.
	// The agent's event stream has no sign that it is connected: the
	// nested session repeats its first denial until the agent has seen
	// one (a fixed sleep lost it on a loaded machine).
	nestedScript := write("nested.sh", fmt.Sprintf(`echo $SLUICE_SESSION > %[2]s/nested.name
%[1]s sessions > %[2]s/nested.list
i=0; until [ -e %[2]s/seen1 ] || [ $i -ge 100 ]; do %[3]s; sleep 0.1; i=$((i+1)); done; touch %[2]s/nested.ready
waitfor %[2]s/nested.go; %[3]s; touch %[2]s/nested.done
waitlong %[2]s/agent.done`, s, d, denied))
	agentScript := write("agent.sh", fmt.Sprintf(`echo $SLUICE_SESSION > %[2]s/agent.name
%[1]s sessions > %[2]s/agent.list
%[1]s sessions show %[3]s 2> %[2]s/show.err; echo $? > %[2]s/show.code
%[1]s sessions kill %[3]s 2> %[2]s/kill.err; echo $? > %[2]s/kill.code
timeout -s INT 20 %[1]s events --follow --json > %[2]s/agent.events & EV=$!
%[1]s run -- sh %[4]s &
i=0; until grep -q egress_denied %[2]s/agent.events || [ $i -ge 400 ]; do sleep 0.05; i=$((i+1)); done
touch %[2]s/seen1; waitfor %[2]s/nested.ready
touch %[2]s/sib.deny; waitfor %[2]s/sib.denied
sleep 0.3; n=$(grep -c egress_denied %[2]s/agent.events)
touch %[2]s/nested.go; waitfor %[2]s/nested.done
i=0; until [ "$(grep -c egress_denied %[2]s/agent.events)" -gt "$n" ] || [ $i -ge 200 ]; do sleep 0.05; i=$((i+1)); done
%[1]s sessions > %[2]s/agent.list2
touch %[2]s/agent.done
kill -INT $EV; wait
`, s, d, sib, nestedScript))
	if _, _, code := f.sluice(t, 65534, 65534, "run", "--", "sh", agentScript); code != 0 {
		t.Fatalf("agent script exit %d", code)
	}
	read := func(name string) string { b, _ := os.ReadFile(filepath.Join(d, name)); return string(b) }
	agent, nested := strings.TrimSpace(read("agent.name")), strings.TrimSpace(read("nested.name"))
	if agent == "" || nested == "" {
		t.Fatalf("the scripts did not run: agent %q nested %q", agent, nested)
	}
	// The SESSION column of `sluice sessions` (the COMMAND column holds
	// the scripts, which name the sibling).
	listed := func(name string) string {
		var names []string
		for i, line := range strings.Split(read(name), "\n") {
			if f := strings.Fields(line); i > 0 && len(f) > 0 {
				names = append(names, f[0])
			}
		}
		slices.Sort(names)
		return strings.Join(names, " ")
	}
	sorted := func(names ...string) string { slices.Sort(names); return strings.Join(names, " ") }
	if got, want := listed("agent.list"), agent; got != want {
		t.Errorf("the agent lists %q, want only its own session %q (not %s)", got, want, sib)
	}
	if got, want := listed("agent.list2"), sorted(agent, nested); got != want {
		t.Errorf("with its nested session running, the agent lists %q, want %q", got, want)
	}
	if got, want := listed("nested.list"), nested; got != want {
		t.Errorf("the nested session lists %q, want only itself %q", got, want)
	}
	for _, op := range []string{"show", "kill"} {
		if code := strings.TrimSpace(read(op + ".code")); code == "0" || !strings.Contains(read(op+".err"), "no session") {
			t.Errorf("the agent could %s its user's other session: exit %s: %s", op, code, read(op+".err"))
		}
	}
	// The events the agent saw: its nested session's denials (the first
	// one or more, and one after the sibling's), and not the sibling's,
	// made between them (the audit log has it).
	var mine, theirs int
	for _, line := range strings.Split(read("agent.events"), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) != nil || e["type"] != "egress_denied" {
			continue
		}
		switch e["session"] {
		case nested:
			mine++
		case sib:
			theirs++
		}
	}
	if mine < 2 || theirs != 0 {
		t.Errorf("the agent's event stream had %d denials of its nested session (want 2 or more) and %d of its user's other session (want 0):\n%s", mine, theirs, read("agent.events"))
	}
	f.waitAudit(t, "egress_denied", func(e map[string]any) bool { return e["session"] == sib })
	// The parent is on record.
	if code, body := f.api(t, "GET", "/v1/sessions/"+nested, nil); code == http.StatusOK && !strings.Contains(body, `"parent":"`+agent+`"`) {
		t.Errorf("the nested session's parent is not %s: %s", agent, body)
	}
	// The twin: the same user outside a session sees the sibling.
	if out, _, code := f.sluice(t, 65534, 65534, "sessions"); code != 0 || !strings.Contains(out, sib+" ") {
		t.Errorf("the user outside a session does not see its session %s: exit %d\n%s", sib, code, out)
	}
	select {
	case <-sibling:
		t.Fatalf("the sibling session ended early")
	default:
	}
}

// TestReusedPeerPidRefused: the daemon learns who a caller is from the
// pid SO_PEERCRED recorded at connect, and reads the rest (cgroup,
// namespaces, groups) from /proc. A confined process that connects, hands
// the connection to its child and exits frees that pid; once an unconfined
// process has it, /proc would describe that process instead. The test
// gives the pid away on purpose (ns_last_pid) and checks that the request
// is still refused as a confined one.
func TestReusedPeerPidRefused(t *testing.T) {
	f := newFixture(t, "203.0.113.10", "203.0.113.20")
	probe := world.BuildProbe(t)
	d := f.dir
	script := fmt.Sprintf(`%[1]s api-handoff %[2]s %[3]s > %[3]s/handoff.tmp; mv %[3]s/handoff.tmp %[3]s/handoff
i=0; while [ ! -e %[3]s/result ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done`, probe, f.sock, d)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sluice(t, 65534, 65534, "run", "--allow", "203.0.113.10", "--", "sh", "-c", script)
	}()
	t.Cleanup(func() {
		_ = os.WriteFile(d+"/go", nil, 0o644)
		<-done
	})
	r, err := world.ParseProbeResult(waitFile(t, d+"/handoff"))
	if err != nil || !r.OK {
		t.Fatalf("api-handoff: %v %v", r, err)
	}
	pid, err := strconv.Atoi(r.Reply)
	if err != nil {
		t.Fatalf("api-handoff reply %q: %v", r.Reply, err)
	}
	// The shell has reaped the probe (its next line ran), so the pid is
	// free: hand it to an unconfined process of the same user.
	var impostor *exec.Cmd
	for range 20 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0o644); err != nil {
			needs.Skip(t, "cannot choose the next pid (needs a writable /proc/sys): %v", err)
		}
		c := exec.Command("/bin/sleep", "30")
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Process.Pid == pid {
			impostor = c
			break
		}
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	if impostor == nil {
		// Chance, not the machine: other processes took the pid.
		t.Skipf("pid %d was not handed to the impostor in 20 tries (other processes took it)", pid)
	}
	defer func() { _ = impostor.Process.Kill(); _ = impostor.Wait() }()
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); strings.Contains(string(b), "/"+f.instance+"/") {
		t.Fatalf("the impostor is inside sluice: %s", b)
	}
	if err := os.WriteFile(d+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := string(waitFile(t, d+"/result"))
	t.Logf("the request on the handed-off connection: %s", got)
	if !strings.HasPrefix(got, "403 ") {
		t.Fatalf("a confined caller whose pid now belongs to an unconfined process got %q, want a 403 refusal", got)
	}
}

// TestSuggestedAllowlistThroughDaemon: through the daemon, a session that
// asked for nothing gets the machine allowlist, and the suggestion builds
// on that.
func TestSuggestedAllowlistThroughDaemon(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	probe := world.BuildProbe(t)
	file := filepath.Join(f.dir, "suggested.json")
	_, stderr, _ := f.sluice(t, 65534, 65534, "run", "--suggest-allowlist", file, "--",
		probe, "tcp", world.DeniedV4.String(), fmt.Sprint(f.denied))
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no suggestion written: %v\n%s", err, stderr)
	}
	var doc struct {
		AllowedHosts []string `json:"allowed_hosts"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if want := []string{"203.0.113.10", "203.0.113.20"}; !slices.Equal(doc.AllowedHosts, want) {
		t.Errorf("suggested %v, want %v", doc.AllowedHosts, want)
	}
	// The same from the daemon's audit log, after the fact.
	f.waitAudit(t, "session_ended", nil)
	out, stderr, code := f.sluice(t, 0, 0, "suggest", "--from", f.audit)
	if code != 0 || strings.TrimSpace(out) != strings.TrimSpace(string(b)) {
		t.Errorf("sluice suggest from the audit log (exit %d):\n%s\nwant:\n%s\n%s", code, out, b, stderr)
	}
}

// TestKernelDNSSurvivesRestart: on the kernel DNS path, a kill -9 of the
// daemon and a restart 2 s later cost no lookup: a session resolving a
// fresh allowed name every 20 ms (each one a new query upstream and a new
// learned address) sees zero failures, before, during and after.
func TestKernelDNSSurvivesRestart(t *testing.T) {
	f := newFixtureFlags(t, []string{"--dns-path", "kernel"}, "*.fresh.test")
	probe := world.BuildProbe(t)
	d := f.dir
	// 250 lookups, 20 ms apart plus the probe's own start: about 6 s.
	script := fmt.Sprintf(`
ok=0; fail=0; i=0
echo 1 > %[2]s/started
while [ $i -lt 250 ]; do
  i=$((i+1))
  if %[1]s -timeout 1s resolve n$i-$$.fresh.test | grep -q '"ok":true'; then ok=$((ok+1)); else fail=$((fail+1)); echo "failed: n$i" >&2; fi
  sleep 0.02
done
echo "ok=$ok fail=$fail" > %[2]s/result.tmp; mv %[2]s/result.tmp %[2]s/result
`, probe, d)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
	}()
	waitFile(t, d+"/started")
	time.Sleep(time.Second)
	f.stopDaemon(t) // kill -9
	time.Sleep(2 * time.Second)
	f.startDaemon(t)
	res := string(waitFile(t, d+"/result"))
	<-done
	if !strings.HasPrefix(res, "ok=250 fail=0") {
		t.Fatalf("lookups across a daemon restart: %s", res)
	}
	// Twin: the names were learned (and are reachable) on the kernel path.
	if !f.dns.Saw("n250-") {
		t.Fatalf("the last fresh name never reached the upstream")
	}
}

// TestMPTCPFallbackThroughDaemon: through the daemon too, a refused MPTCP
// socket (which Go servers try before TCP) is named mptcp in the daemon's
// audit log and is neither printed nor counted on the client's terminal; a
// Go listener starts normally.
func TestMPTCPFallbackThroughDaemon(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	out, stderr, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", world.BuildProbe(t), "listen-go", "127.0.0.1")
	if r, err := world.ParseProbeResult([]byte(out)); err != nil || !r.OK || code != 0 {
		t.Fatalf("Go listener through the daemon: %v %v (exit %d)", r, err, code)
	}
	e := f.waitAudit(t, "egress_denied", func(e map[string]any) bool { return e["proto"] == "mptcp" })
	if e["dst"] != "socket(AF_INET, SOCK_STREAM, mptcp)" || e["comm"] != "probe" {
		t.Errorf("MPTCP refusal in the audit log: %v", e)
	}
	if strings.Contains(stderr, "mptcp") || strings.Contains(stderr, "SOCK_STREAM, tcp") || strings.Contains(stderr, "sluice: denied") {
		t.Errorf("the MPTCP refusal reached the client's terminal:\n%s", stderr)
	}
}

// TestDefaultDNSFailoverRestart: on the default DNS path (auto), a kill -9
// of the daemon and a restart 2 s later cost no lookup of a session that
// resolves a fresh allowed name every 20 ms: while the daemon is down its
// queries take the kernel path, and after the restart the resolver (and its
// cache) answers again. A lookup is what a stub resolver does: one query,
// and one more after a timeout (glibc and Go both retry); a query the
// resolver held in memory when it was killed is lost with it, and only the
// retry can recover it, through the kernel path. During the outage an
// unlisted name never reaches the world's DNS server, which its unconfined
// twin shows it would.
func TestDefaultDNSFailoverRestart(t *testing.T) {
	if p := os.Getenv("SLUICE_E2E_DNS_PATH"); p != "" && p != "auto" {
		t.Skipf("SLUICE_E2E_DNS_PATH=%s: the default path is tested without it", p)
	}
	f := newFixtureFlags(t, nil, "*.fresh.test")
	if out, _, _ := f.sluice(t, 0, 0, "check"); !strings.Contains(out, "auto: queries go through the session's local resolver") ||
		!strings.Contains(out, "in force for the daemon's sessions") {
		t.Fatalf("sluice check does not name auto as the daemon's DNS path:\n%s", out)
	}
	probe := world.BuildProbe(t)
	d := f.dir
	script := fmt.Sprintf(`
ok=0; fail=0; first=0; i=0
echo 1 > %[2]s/started
while [ $i -lt 250 ]; do
  i=$((i+1))
  n=n$i-$$.fresh.test
  if %[1]s -timeout 1s resolve $n | grep -q '"ok":true'; then ok=$((ok+1))
  elif first=$((first+1)); echo "first try failed: $n" >&2; %[1]s -timeout 1s resolve $n | grep -q '"ok":true'; then ok=$((ok+1))
  else fail=$((fail+1)); echo "failed: $n" >&2; fi
  if [ -e %[2]s/down ] && [ ! -e %[2]s/secret ]; then
    %[1]s -timeout 1s dns %[3]s 53 s$$.secret.test A udp > %[2]s/secret.tmp; mv %[2]s/secret.tmp %[2]s/secret
  fi
  sleep 0.02
done
echo "ok=$ok fail=$fail first=$first" > %[2]s/result.tmp; mv %[2]s/result.tmp %[2]s/result
while [ ! -e %[2]s/adopted ]; do sleep 0.05; done
%[1]s dns %[3]s 53 AgAiN.fresh.test A udp > %[2]s/again1
%[1]s dns %[3]s 53 AgAiN.fresh.test A udp > %[2]s/again2
`, probe, d, dnsAddr)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
	}()
	waitFile(t, d+"/started")
	time.Sleep(time.Second)
	f.stopDaemon(t) // kill -9
	killed := time.Now()
	if err := os.WriteFile(d+"/down", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	secret := waitFile(t, d+"/secret")
	time.Sleep(time.Until(killed.Add(2 * time.Second)))
	f.startDaemon(t)
	f.waitAudit(t, "session_adopted", nil)
	if err := os.WriteFile(d+"/adopted", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := string(waitFile(t, d+"/result"))
	t.Logf("lookups across a daemon restart: %s", res)
	if !strings.HasPrefix(res, "ok=250 fail=0") {
		t.Fatalf("lookups across a daemon restart: %s", res)
	}
	// Containment during the outage: judged by the world's log.
	if r, _ := world.ParseProbeResult(secret); r.OK || f.dns.Saw("secret.test") {
		t.Fatalf("an unlisted name with the daemon down: %s (the world saw it: %v)", r, f.dns.Saw("secret.test"))
	}
	// Its twin: unconfined, the same query reaches the world's server.
	if r := f.w.RunProbe(t, nil, "dns", dnsAddr.String(), "53", "twin.secret.test", "A", "udp"); !f.dns.Saw("twin.secret.test") {
		t.Fatalf("unconfined twin: the world never saw the unlisted name: %s", r)
	}
	// The resolver is back: the name comes normalised (the kernel path
	// forwards it as the program spelled it) and the repeat is answered
	// from its cache, without reaching the world's server.
	for _, n := range []string{"again1", "again2"} {
		if r, _ := world.ParseProbeResult(waitFile(t, d+"/"+n)); r.Rcode != "NOERROR" || len(r.Answers) == 0 {
			t.Fatalf("after the restart, %s: %s", n, r)
		}
	}
	<-done
	if got := f.dns.Seen("again.fresh.test"); got != 1 || f.dns.SawExactly("AgAiN.fresh.test.") {
		t.Fatalf("after the restart the world saw the repeated name %d times (as sent: %v), want once, normalised by the resolver",
			got, f.dns.SawExactly("AgAiN.fresh.test."))
	}
}
