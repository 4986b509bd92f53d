// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// Ask mode end to end (docs/ask.md): a confined client asks for an
// unlisted name, the resolver holds the answer, a person answers from
// outside every session with sluice prompts / approve / deny, and the
// world records what got through.

// askPrompt is a line of `sluice prompts --json`.
type askPrompt struct {
	ID      string `json:"id"`
	Session string `json:"session"`
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	AskedBy string `json:"asked_by"`
	State   string `json:"state"`
}

// pendingPrompts lists the prompts as root, outside every session.
func (f *fixture) pendingPrompts(t *testing.T) []askPrompt {
	t.Helper()
	out, stderr, code := f.sluice(t, 0, 0, "prompts", "--json")
	if code != 0 {
		t.Fatalf("sluice prompts: %d: %s", code, stderr)
	}
	var ps []askPrompt
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var p askPrompt
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("sluice prompts --json line %q: %v", line, err)
		}
		ps = append(ps, p)
	}
	return ps
}

// waitPrompt waits (bounded) for a pending prompt for name.
func (f *fixture) waitPrompt(t *testing.T, name string) askPrompt {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range f.pendingPrompts(t) {
			if p.Name == name {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no prompt for %s appeared", name)
	return askPrompt{}
}

// askRun starts `sluice run --ask` as root for uid 65534 with a shell
// script as the command; the returned channel gets its stdout.
func (f *fixture) askRun(t *testing.T, flags []string, script string) <-chan string {
	t.Helper()
	done := make(chan string, 1)
	args := append([]string{"run", "--user", "65534:65534"}, flags...)
	args = append(args, "--", "/bin/sh", "-c", script)
	go func() {
		out, _, _ := f.sluice(t, 0, 0, args...)
		done <- out
	}()
	return done
}

func waitOut(t *testing.T, c <-chan string) string {
	t.Helper()
	select {
	case out := <-c:
		return out
	case <-time.After(60 * time.Second):
		t.Fatal("the session did not end")
		return ""
	}
}

// results parses every probe result line of out.
func results(t *testing.T, out string) []world.ProbeResult {
	t.Helper()
	var rs []world.ProbeResult
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		r, err := world.ParseProbeResult([]byte(line))
		if err != nil {
			t.Fatalf("probe line %q: %v", line, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// contactsTo counts the world's TCP arrivals at addr:port.
func (f *fixture) contactsTo(addr string, port uint16) int {
	n := 0
	for _, c := range f.w.Contacts() {
		if c.Proto == 6 && c.Local.Addr().String() == addr && c.Local.Port() == port {
			n++
		}
	}
	return n
}

func TestAskMode(t *testing.T) {
	f := newFixtureFlags(t, []string{"--ask-timeout", "4s", "--ask-max-pending", "2"}, "allowed.test")
	probe := world.BuildProbe(t)
	port := fmt.Sprint(f.port)
	allowed := world.AllowedV4.String()

	t.Run("once", func(t *testing.T) {
		before := f.contactsTo(allowed, f.port)
		out := f.askRun(t, []string{"--ask"}, probe+" -timeout 20s resolve-tcp once.fresh.test "+port)
		p := f.waitPrompt(t, "once.fresh.test")
		if p.ID == "" || p.Session == "" || p.AskedBy == "" || p.Kind != "name" {
			t.Fatalf("prompt %+v lacks its fields", p)
		}
		if f.dns.Saw("once.fresh.test") {
			t.Fatal("the held name was forwarded before anyone answered")
		}
		if _, stderr, code := f.sluice(t, 0, 0, "approve", p.ID, "--once"); code != 0 {
			t.Fatalf("approve --once: %s", stderr)
		}
		rs := results(t, waitOut(t, out))
		if len(rs) != 1 || !rs[0].OK {
			t.Fatalf("the waiting lookup and connect after approve --once: %+v", rs)
		}
		if f.contactsTo(allowed, f.port) != before+1 {
			t.Fatal("the world recorded no connection after approve --once")
		}
		f.waitAudit(t, "permission_granted", func(e map[string]any) bool {
			return e["prompt"] == p.ID && e["scope"] == "once" && e["answered_by"] == "user:root"
		})
	})

	t.Run("session", func(t *testing.T) {
		before := f.contactsTo(allowed, f.port)
		out := f.askRun(t, []string{"--ask"}, probe+" -timeout 20s resolve-tcp sess.fresh.test "+port+"; "+
			probe+" -timeout 3s resolve-tcp sess.fresh.test "+port)
		p := f.waitPrompt(t, "sess.fresh.test")
		if _, stderr, code := f.sluice(t, 0, 0, "approve", p.ID, "--session"); code != 0 {
			t.Fatalf("approve --session: %s", stderr)
		}
		rs := results(t, waitOut(t, out))
		if len(rs) != 2 || !rs[0].OK || !rs[1].OK {
			t.Fatalf("two lookups after approve --session: %+v", rs)
		}
		if f.contactsTo(allowed, f.port) != before+2 {
			t.Fatal("the world did not record both connections")
		}
	})

	t.Run("deny", func(t *testing.T) {
		before := f.contactsTo(allowed, f.port)
		out := f.askRun(t, []string{"--ask"}, probe+" -timeout 20s resolve-tcp deny.fresh.test "+port+"; "+
			probe+" -timeout 3s resolve deny.fresh.test")
		p := f.waitPrompt(t, "deny.fresh.test")
		if _, stderr, code := f.sluice(t, 0, 0, "deny", p.ID); code != 0 {
			t.Fatalf("deny: %s", stderr)
		}
		rs := results(t, waitOut(t, out))
		if len(rs) != 2 || rs[0].OK || rs[1].OK {
			t.Fatalf("lookups after deny: %+v", rs)
		}
		if f.dns.Saw("deny.fresh.test") || f.contactsTo(allowed, f.port) != before {
			t.Fatal("a denied name reached the world")
		}
		// The second question was refused without a new prompt.
		n := 0
		for _, e := range f.auditEvents(t) {
			if e["type"] == "permission_asked" && e["host"] == "deny.fresh.test" {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d prompts for a denied name, want 1", n)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		out := f.askRun(t, []string{"--ask"}, probe+" -timeout 15s resolve slow.fresh.test")
		f.waitPrompt(t, "slow.fresh.test")
		rs := results(t, waitOut(t, out))
		if len(rs) != 1 || rs[0].OK {
			t.Fatalf("an unanswered lookup: %+v", rs)
		}
		f.waitAudit(t, "permission_timeout", func(e map[string]any) bool { return e["host"] == "slow.fresh.test" })
		if f.dns.Saw("slow.fresh.test") {
			t.Fatal("an unanswered name was forwarded")
		}
	})

	t.Run("refused inside sessions", func(t *testing.T) {
		idFile := filepath.Join(f.dir, "prompt-id")
		// The asking session's own process tries to approve its question.
		script := probe + " -timeout 20s resolve inside.fresh.test & " +
			"i=0; while [ ! -s " + idFile + " ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; " +
			sluiceBin + " --socket " + f.sock + " approve $(cat " + idFile + ") --session; echo \"approve-rc=$?\"; wait"
		out := f.askRun(t, []string{"--ask"}, script)
		p := f.waitPrompt(t, "inside.fresh.test")
		if err := os.WriteFile(idFile, []byte(p.ID), 0o644); err != nil {
			t.Fatal(err)
		}
		// And a process of another session.
		other, stderr, _ := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "/bin/sh", "-c",
			sluiceBin+" --socket "+f.sock+" approve "+p.ID+"; echo \"approve-rc=$?\"")
		if approveRC(other) == "0" || approveRC(other) == "" {
			t.Fatalf("approve from another session: %s %s", other, stderr)
		}
		if still := f.waitPrompt(t, "inside.fresh.test"); still.ID != p.ID {
			t.Fatalf("the prompt changed after a refused approval: %+v", still)
		}
		got := waitOut(t, out)
		if rc := approveRC(got); rc == "0" || rc == "" {
			t.Fatalf("approve from inside the asking session: %s", got)
		}
		if rs := results(t, got); len(rs) != 1 || rs[0].OK {
			t.Fatalf("the lookup was approved from inside a session: %+v", rs)
		}
		if f.dns.Saw("inside.fresh.test") {
			t.Fatal("the name reached the world")
		}
		f.waitAudit(t, "policy_change_refused", func(e map[string]any) bool {
			return strings.Contains(fmt.Sprint(e["message"]), "/v1/prompts/"+p.ID)
		})
	})

	t.Run("always", func(t *testing.T) {
		out := f.askRun(t, []string{"--ask"}, probe+" -timeout 20s resolve-tcp always.fresh.test "+port)
		p := f.waitPrompt(t, "always.fresh.test")
		// The session's own user, who is no admin: refused.
		if _, stderr, code := f.sluice(t, 65534, 65534, "approve", p.ID, "--always"); code == 0 || !strings.Contains(stderr, "admin") {
			t.Fatalf("approve --always by an ordinary user: %d %s", code, stderr)
		}
		if b, _ := os.ReadFile(f.allow); strings.Contains(string(b), "always.fresh.test") {
			t.Fatal("the allowlist changed for an ordinary user")
		}
		if _, stderr, code := f.sluice(t, 0, 0, "approve", p.ID, "--always"); code != 0 {
			t.Fatalf("approve --always by root: %s", stderr)
		}
		if rs := results(t, waitOut(t, out)); len(rs) != 1 || !rs[0].OK {
			t.Fatalf("after approve --always: %+v", rs)
		}
		b, err := os.ReadFile(f.allow)
		if err != nil || !strings.Contains(string(b), "always.fresh.test") || !strings.Contains(string(b), "user:root") {
			t.Fatalf("the allowlist after --always: %s %v", b, err)
		}
	})

	t.Run("ip literal", func(t *testing.T) {
		denied := world.DeniedV4.String()
		flag := filepath.Join(f.dir, "ip-approved")
		before := f.contactsTo(denied, f.denied)
		out := f.askRun(t, []string{"--ask"}, probe+" tcp "+denied+" "+fmt.Sprint(f.denied)+"; "+
			"i=0; while [ ! -e "+flag+" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done; "+
			probe+" tcp "+denied+" "+fmt.Sprint(f.denied))
		p := f.waitPrompt(t, denied)
		if p.Kind != "addr" {
			t.Fatalf("prompt %+v", p)
		}
		if f.contactsTo(denied, f.denied) != before {
			t.Fatal("the first connect reached the world")
		}
		if _, stderr, code := f.sluice(t, 0, 0, "approve", p.ID); code != 0 {
			t.Fatalf("approve: %s", stderr)
		}
		if err := os.WriteFile(flag, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rs := results(t, waitOut(t, out))
		if len(rs) != 2 || rs[0].OK || rs[0].Errno != "EPERM" || !rs[1].OK {
			t.Fatalf("connects before and after the approval: %+v", rs)
		}
		if f.contactsTo(denied, f.denied) != before+1 {
			t.Fatal("the retry after the approval did not reach the world")
		}
	})

	t.Run("ci", func(t *testing.T) {
		args := []string{"run", "--user", "65534:65534", "--ask", "--", probe, "-timeout", "10s", "resolve", "ci.fresh.test"}
		out, stderr, _ := f.sluiceEnv(t, []string{"CI=true"}, args...)
		if rs := results(t, out); len(rs) != 1 || rs[0].OK {
			t.Fatalf("a CI lookup: %+v", rs)
		}
		if !strings.Contains(stderr, "would ask: ci.fresh.test") || !strings.Contains(stderr, `+ "ci.fresh.test"`) {
			t.Fatalf("the CI summary: %s", stderr)
		}
		for _, p := range f.pendingPrompts(t) {
			if p.Name == "ci.fresh.test" {
				t.Fatal("a CI job raised a prompt")
			}
		}
		if f.dns.Saw("ci.fresh.test") {
			t.Fatal("a CI lookup reached the world")
		}
	})

	t.Run("cap", func(t *testing.T) {
		out := f.askRun(t, []string{"--ask"}, probe+" -timeout 10s resolve c1.fresh.test > /dev/null & "+
			probe+" -timeout 10s resolve c2.fresh.test > /dev/null & "+
			"sleep 1; "+probe+" -timeout 3s resolve c3.fresh.test; wait")
		f.waitPrompt(t, "c1.fresh.test")
		f.waitPrompt(t, "c2.fresh.test")
		f.waitAudit(t, "permission_denied", func(e map[string]any) bool {
			return e["host"] == "c3.fresh.test" && strings.Contains(fmt.Sprint(e["reason"]), "too many")
		})
		for _, p := range f.pendingPrompts(t) {
			if p.Name == "c3.fresh.test" {
				t.Fatal("a prompt past the cap")
			}
		}
		if rs := results(t, waitOut(t, out)); len(rs) != 1 || rs[0].OK {
			t.Fatalf("the lookup past the cap: %+v", rs)
		}
	})

	t.Run("restart", func(t *testing.T) {
		out := f.askRun(t, []string{"--ask"}, probe+" -timeout 20s resolve restart.fresh.test")
		f.waitPrompt(t, "restart.fresh.test")
		f.stopDaemonGracefully(t)
		f.waitAudit(t, "permission_denied", func(e map[string]any) bool {
			return e["host"] == "restart.fresh.test" && e["answered_by"] == "daemon stopped"
		})
		f.startDaemon(t)
		waitOut(t, out)
		if len(f.pendingPrompts(t)) != 0 {
			t.Fatal("a restarted daemon has pending prompts")
		}
	})

	metrics := f.metricsText(t)
	for _, typ := range []string{"permission_asked", "permission_granted", "permission_denied", "permission_timeout"} {
		if !strings.Contains(metrics, `sluice_permission_events_total{type="`+typ+`"}`) {
			t.Errorf("metrics lack the %s counter", typ)
		}
	}
}

// sluiceEnv is sluice as root with more environment variables.
func (f *fixture) sluiceEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return f.sluiceFrom(t, func(c *exec.Cmd) error {
		c.Env = append(environWithout("CI"), env...)
		return f.w.StartInClient(c)
	}, 0, 0, args...)
}

// metricsText scrapes the daemon's metrics.
func (f *fixture) metricsText(t *testing.T) string {
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

// approveRC is the exit status a session script echoed as approve-rc=N.
func approveRC(out string) string {
	_, rest, ok := strings.Cut(out, "approve-rc=")
	if !ok {
		return ""
	}
	rc, _, _ := strings.Cut(rest, "\n")
	return strings.TrimSpace(rc)
}

// askCDN is the one address of every name under ask.test: a CDN that
// records the SNI and Host of what reaches it.
var askCDN = netip.MustParseAddr("203.0.113.62")

// TestAskNamesReachTheServer (issue 30): a person's approval of a name
// lets the connection the name was asked for through the name check
// (the kernel's, on 80 the HTTP Host and on 443 the TLS SNI): before, the
// resolver learned the addresses and the kernel refused the request with
// "the address was allowed for once.allowed.test". Another name on the
// same address stays refused: an approval is of its name, not of the
// address. The CDN's records are the judge.
func TestAskNamesReachTheServer(t *testing.T) {
	f := newFixture(t, "allowed.test")
	cdn := f.w.ServeCDN(t, askCDN)
	probe := world.BuildProbe(t)
	addr := askCDN.String()
	scopes := []string{"once", "session", "always"}
	type names struct{ http, tls, otherHTTP, otherTLS string }
	of := func(scope string) names {
		return names{scope + "-80.ask.test", scope + "-443.ask.test", scope + "-other80.ask.test", scope + "-other443.ask.test"}
	}
	// The twins: without sluice the CDN receives every one of the names.
	for _, scope := range scopes {
		n := of(scope)
		for _, c := range []struct{ action, port, name string }{
			{"http-name", "80", n.http}, {"http-name", "80", n.otherHTTP},
			{"tls-name", "443", n.tls}, {"tls-name", "443", n.otherTLS},
		} {
			if r := f.w.RunProbe(t, nil, c.action, addr, "4", c.port, c.name); !r.OK || !cdn.Saw(c.name) {
				t.Fatalf("unconfined %s %s: %s (SNIs %q, hosts %q)", c.action, c.name, r, cdn.SNIs(), cdn.Hosts())
			}
		}
	}
	f.w.ServeCDNReset(cdn)
	for _, scope := range scopes {
		t.Run(scope, func(t *testing.T) {
			n := of(scope)
			// One session: the approved name on 80, another name on the
			// address it taught the session, the same on 443.
			script := probe + " -timeout 25s http-name " + n.http + " 4 80 " + n.http + "; " +
				probe + " -timeout 5s http-name " + addr + " 4 80 " + n.otherHTTP + "; " +
				probe + " -timeout 25s tls-name " + n.tls + " 4 443 " + n.tls + "; " +
				probe + " -timeout 5s tls-name " + addr + " 4 443 " + n.otherTLS
			out := f.askRun(t, []string{"--ask"}, script)
			for _, name := range []string{n.http, n.tls} {
				p := f.waitPrompt(t, name)
				if _, stderr, code := f.sluice(t, 0, 0, "approve", p.ID, "--"+scope); code != 0 {
					t.Fatalf("approve %s --%s: %s", name, scope, stderr)
				}
			}
			rs := results(t, waitOut(t, out))
			if len(rs) != 4 {
				t.Fatalf("want 4 probe results: %+v", rs)
			}
			if !rs[0].OK || !slices.Contains(cdn.Hosts(), n.http) {
				t.Errorf("approve --%s: HTTP Host %s: %+v; the CDN's hosts %q", scope, n.http, rs[0], cdn.Hosts())
			}
			if !rs[2].OK || !slices.Contains(cdn.SNIs(), n.tls) {
				t.Errorf("approve --%s: TLS SNI %s: %+v; the CDN's SNIs %q", scope, n.tls, rs[2], cdn.SNIs())
			}
			if rs[1].OK || rs[3].OK || cdn.Saw(n.otherHTTP) || cdn.Saw(n.otherTLS) {
				t.Errorf("approve --%s let an unapproved name through: %+v %+v; SNIs %q, hosts %q", scope, rs[1], rs[3], cdn.SNIs(), cdn.Hosts())
			}
			// The refusal names the name refused, never as one the
			// address was allowed for.
			for _, name := range []string{n.otherHTTP, n.otherTLS} {
				e := f.waitAudit(t, "name_refused", func(e map[string]any) bool { return e["host"] == name })
				if msg := fmt.Sprint(e["message"], e["reason"]); strings.Contains(msg, "allowed for "+name) {
					t.Errorf("a self-contradictory refusal: %s", msg)
				}
			}
		})
	}
}
