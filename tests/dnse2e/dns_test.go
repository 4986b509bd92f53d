// SPDX-License-Identifier: Apache-2.0

//go:build linux

package dnse2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/tests/world"
)

func TestAllowedNameReachableByName(t *testing.T) {
	f := newFixture(t)
	allow := []string{"--allow", "allowed.test", "--allow", "allowed6.test"}
	port := fmt.Sprint(f.port)

	// Negative twin first: the IP is not reachable before sluice's
	// resolver handed it out.
	r, _ := f.probe(t, allow, "tcp", world.AllowedV4.String(), port)
	if r.OK || r.Errno != "EPERM" {
		t.Fatalf("before resolving: want EPERM, got %s", r)
	}
	f.w.AssertNothingArrived(t, world.ToPort(world.AllowedV4, f.port), 200*time.Millisecond)

	r, _ = f.probe(t, allow, "resolve-tcp", "allowed.test", port)
	if !r.OK || r.Reply != world.Greeting {
		t.Fatalf("resolve-tcp allowed.test: %s", r)
	}
	r, _ = f.probe(t, allow, "resolve-tcp", "allowed6.test", fmt.Sprint(f.port6))
	if !r.OK || !slices.Contains(r.Answers, world.AllowedV6.String()) {
		t.Fatalf("resolve-tcp allowed6.test over IPv6: %s", r)
	}
}

func TestRefusedNameIsNeverForwarded(t *testing.T) {
	f := newFixture(t)
	label := randomLabel()
	name := label + ".denied.test"
	for _, mode := range []string{"udp", "udp-unconnected", "tcp"} {
		r, stderr := f.probe(t, []string{"--allow", "allowed.test"}, "dns", authV4.String(), "53", name, "A", mode)
		if r.Rcode != "REFUSED" {
			t.Errorf("%s: %s: want REFUSED, got %s", mode, name, r)
		}
		if !strings.Contains(stderr, "refused DNS query for "+name+" (A): not in the allowlist") || !strings.Contains(stderr, "asked by probe[") {
			t.Errorf("%s: stderr does not say which process asked for which name:\n%s", mode, stderr)
		}
	}
	if f.auth.Saw(label) {
		t.Fatalf("the authoritative server saw %s: a refused name was forwarded", label)
	}
	// Positive twin: an allowed name does reach it.
	r, _ := f.probe(t, []string{"--allow", "allowed.test"}, "dns", authV4.String(), "53", "allowed.test", "A", "udp")
	if r.Rcode != "NOERROR" || !f.auth.Saw("allowed.test") {
		t.Fatalf("allowed name: %s, forwarded=%v", r, f.auth.Saw("allowed.test"))
	}
}

func TestForeignResolverIsRedirected(t *testing.T) {
	f := newFixture(t)
	allow := []string{"--allow", "allowed.test"}
	cases := []struct{ server, mode, from string }{
		{foreignV4.String(), "udp", "203.0.113.99:53"},
		{foreignV4.String(), "udp-unconnected", "203.0.113.99:53"},
		{foreignV4.String(), "tcp", "203.0.113.99:53"},
		{foreignV6.String(), "udp", "[2001:db8:3::99]:53"},
		{foreignV6.String(), "udp-unconnected", "[2001:db8:3::99]:53"},
		{foreignV6.String(), "tcp", "[2001:db8:3::99]:53"},
		{"::ffff:203.0.113.99", "udp-unconnected", "[::ffff:203.0.113.99]:53"},
	}
	for _, c := range cases {
		r, _ := f.probe(t, allow, "dns", c.server, "53", "allowed.test", "A", c.mode)
		if !r.OK || !slices.Contains(r.Answers, world.AllowedV4.String()) {
			t.Errorf("%s via %s: want sluice's answer 203.0.113.10, got %s", c.mode, c.server, r)
		}
		if r.From != c.from {
			t.Errorf("%s via %s: reply seems to come from %q, want %q", c.mode, c.server, r.From, c.from)
		}
	}
	if n := f.foreign.Count() + f.foreign6.Count(); n != 0 {
		t.Fatalf("the foreign resolver received %d queries", n)
	}
	f.w.AssertNothingArrived(t, world.Any(world.To(foreignV4), world.To(foreignV6)), 200*time.Millisecond)

	// The program's own resolv.conf is honoured too, whatever it names.
	r, _ := f.probe(t, allow, "resolve", "allowed.test")
	if !r.OK || !slices.Contains(r.Answers, world.AllowedV4.String()) {
		t.Fatalf("system resolver: %s", r)
	}
}

func TestCNAMEChainIntoAnotherZone(t *testing.T) {
	f := newFixture(t)
	r, _ := f.probe(t, []string{"--allow", "cname.test"}, "resolve-tcp", "cname.test", fmt.Sprint(f.port))
	if !r.OK || r.Reply != world.Greeting {
		t.Fatalf("cname.test -> target.other.test: %s", r)
	}
	// target.other.test itself was not allowed.
	r, _ = f.probe(t, []string{"--allow", "cname.test"}, "dns", authV4.String(), "53", "target.other.test", "A", "udp")
	if r.Rcode != "REFUSED" {
		t.Fatalf("the CNAME target is not an allowlist entry of its own: %s", r)
	}
}

func TestRebindingAnswersAreNotLearned(t *testing.T) {
	f := newFixture(t)
	allow := []string{"--allow", "rebind-lo.test", "--allow", "rebind-meta.test", "--allow", "rebind-priv.test"}
	for name, addr := range map[string]string{"rebind-lo.test": "127.0.0.1", "rebind-meta.test": "169.254.169.254", "rebind-priv.test": "10.0.0.5"} {
		r, stderr := f.probe(t, allow, "dns", authV4.String(), "53", name, "A", "udp")
		if r.Rcode != "NOERROR" || len(r.Answers) != 0 {
			t.Errorf("%s: want an empty answer, got %s", name, r)
		}
		if !strings.Contains(stderr, "dropped "+addr+" from the answer for "+name) {
			t.Errorf("%s: no rebinding line on stderr:\n%s", name, stderr)
		}
	}
	// Explicitly allowed private answers are kept.
	dir := t.TempDir()
	file := filepath.Join(dir, "network_allowlist.json")
	if err := os.WriteFile(file, []byte(`{"allowed_hosts": [{"host": "rebind-priv.test", "allow_private": true}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _ := f.probe(t, []string{"--allowlist", file}, "dns", authV4.String(), "53", "rebind-priv.test", "A", "udp")
	if !slices.Contains(r.Answers, "10.0.0.5") {
		t.Fatalf("allow_private: want 10.0.0.5 kept, got %s", r)
	}
}

func TestLearnedIPExpires(t *testing.T) {
	f := newFixture(t)
	probe := world.BuildProbe(t)
	port := fmt.Sprint(f.port)
	script := fmt.Sprintf(`%[1]s resolve-tcp short.test %[2]s; sleep 3.5; %[1]s tcp 203.0.113.10 %[2]s; %[1]s resolve-tcp short.test %[2]s`, probe, port)
	out, stderr, _ := f.run(t, []string{"--allow", "short.test", "--dns-ttl-min", "1s", "--dns-grace", "1s"}, "sh", "-c", script)
	rs := results(t, out)
	if len(rs) != 3 {
		t.Fatalf("want 3 results, got %d:\n%s", len(rs), out)
	}
	if !rs[0].OK {
		t.Errorf("fresh answer: %s", rs[0])
	}
	if rs[1].OK || rs[1].Errno != "EPERM" {
		t.Errorf("after TTL (2 s) + grace (1 s): want EPERM, got %s", rs[1])
	}
	if !strings.Contains(stderr, "TTL expired") {
		t.Errorf("stderr does not explain the expiry:\n%s", stderr)
	}
	if !rs[2].OK {
		t.Errorf("re-resolved: %s", rs[2])
	}
}

func TestPerNameCapGivesServfail(t *testing.T) {
	f := newFixture(t)
	r, stderr := f.probe(t, []string{"--allow", "many.test", "--dns-max-ips-per-name", "3"}, "dns", authV4.String(), "53", "many.test", "A", "udp")
	if r.Rcode != "SERVFAIL" {
		t.Fatalf("5 addresses over a cap of 3: want SERVFAIL, got %s", r)
	}
	if !strings.Contains(stderr, "SERVFAIL for many.test") || !strings.Contains(stderr, "cap") {
		t.Fatalf("no event for the cap:\n%s", stderr)
	}
	r, _ = f.probe(t, []string{"--allow", "many.test", "--dns-max-ips-per-name", "5"}, "dns", authV4.String(), "53", "many.test", "A", "udp")
	if r.Rcode != "NOERROR" || len(r.Answers) != 5 {
		t.Fatalf("at the cap: %s", r)
	}
}

func TestWildcardAndApex(t *testing.T) {
	f := newFixture(t)
	allow := []string{"--allow", "*.wild.test"}
	for name, want := range map[string]string{"a.wild.test": "NOERROR", "x.y.wild.test": "NOERROR", "A.Wild.Test.": "NOERROR", "wild.test": "REFUSED"} {
		r, _ := f.probe(t, allow, "dns", authV4.String(), "53", name, "A", "udp")
		if r.Rcode != want {
			t.Errorf("%s: want %s, got %s", name, want, r)
		}
	}
}

func TestSessionsDoNotShareLearnedIPs(t *testing.T) {
	f := newFixture(t)
	probe := world.BuildProbe(t)
	dir := t.TempDir()
	_ = os.Chmod(filepath.Dir(dir), 0o755)
	_ = os.Chmod(dir, 0o777)
	marker := filepath.Join(dir, "resolved")
	done := make(chan struct{})
	go func() {
		defer close(done)
		script := fmt.Sprintf(`%s resolve-tcp allowed.test %d > %s.tmp; mv %s.tmp %s; sleep 3`, probe, f.port, marker, marker, marker)
		f.run(t, []string{"--allow", "allowed.test"}, "sh", "-c", script)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(marker); err == nil && len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("session A did not resolve in time")
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(marker)
	if ra, err := world.ParseProbeResult(b); err != nil || !ra.OK {
		t.Fatalf("session A: %s %v", b, err)
	}
	// Session B, running at the same time, allows another name only.
	r, _ := f.probe(t, []string{"--allow", "second.test"}, "tcp", world.AllowedV4.String(), fmt.Sprint(f.port))
	if r.OK || r.Errno != "EPERM" {
		t.Fatalf("session B reached an address only session A learned: %s", r)
	}
	<-done
}

// TestSuggestedAllowlist: --suggest-allowlist writes the allowlist that
// would have let the command do what it was refused (a refused name and an
// address dialled without a name), whether the run enforced or audited;
// run again with that file, the same command succeeds.
func TestSuggestedAllowlist(t *testing.T) {
	f := newFixture(t)
	probe := world.BuildProbe(t)
	script := fmt.Sprintf("%[1]s resolve-tcp denied.test %[2]d; %[1]s tcp %[3]s %[4]d",
		probe, f.denied, world.AllowedV6, f.port6)
	dir := t.TempDir()
	want := []string{"2001:db8:2::10", "allowed.test", "denied.test"}
	check := func(file string) {
		t.Helper()
		p, err := allowlist.Load(file)
		if err != nil {
			t.Fatalf("the suggestion does not load: %v", err)
		}
		var got []string
		for _, e := range p.Entries() {
			got = append(got, e.String())
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: suggested %v, want %v", file, got, want)
		}
	}

	enforced := filepath.Join(dir, "enforced.json")
	out, stderr, _ := f.run(t, []string{"--allow", "allowed.test", "--suggest-allowlist", enforced}, "sh", "-c", script)
	if rs := results(t, out); len(rs) != 2 || rs[0].OK || rs[1].OK {
		t.Fatalf("enforcing run: want both refused, got %v", rs)
	}
	if !strings.Contains(stderr, "added denied.test 2001:db8:2::10; review it before use") {
		t.Errorf("stderr does not say what was added:\n%s", stderr)
	}
	check(enforced)

	audited := filepath.Join(dir, "audited.json")
	out, _, _ = f.run(t, []string{"--audit", "--allow", "allowed.test", "--suggest-allowlist", audited}, "sh", "-c", script)
	if rs := results(t, out); len(rs) != 2 || !rs[0].OK || !rs[1].OK {
		t.Fatalf("audited run: want both through, got %v", rs)
	}
	check(audited)

	out, _, _ = f.run(t, []string{"--allowlist", audited}, "sh", "-c", script)
	if rs := results(t, out); len(rs) != 2 || !rs[0].OK || !rs[1].OK {
		t.Fatalf("with the suggested allowlist: want both through, got %v", rs)
	}

	// sluice learn is the audited run under its own name.
	learned := filepath.Join(dir, "learned.json")
	out, _, code := f.sluice(t, "learn", []string{"--allow", "allowed.test", "-o", learned}, "sh", "-c", script)
	if rs := results(t, out); code != 0 || len(rs) != 2 || !rs[0].OK || !rs[1].OK {
		t.Fatalf("sluice learn: want both through and exit 0, got %v, exit %d", rs, code)
	}
	check(learned)
	if _, stderr, code := f.sluice(t, "learn", nil, "true"); code == 0 || !strings.Contains(stderr, "-o FILE") {
		t.Errorf("sluice learn without -o: exit %d: %s", code, stderr)
	}
}

// TestKernelPathGoesStraightUpstream: with --dns-path kernel, an allowed
// query reaches the upstream as the program sent it (its case intact:
// sluice's resolver would have normalised it), and is still learned; with
// --dns-path resolver it goes through the resolver.
func TestKernelPathGoesStraightUpstream(t *testing.T) {
	f := newFixture(t)
	allow := []string{"--allow", "allowed.test", "--dns-path", "kernel"}
	if os.Getenv("SLUICE_E2E_DNS_PATH") == "resolver" {
		t.Skip("SLUICE_E2E_DNS_PATH=resolver")
	}
	r, stderr := f.probe(t, allow, "resolve-tcp", "AlLoWeD.TeSt", fmt.Sprint(f.port))
	if !r.OK || r.Reply != world.Greeting {
		t.Fatalf("kernel path: resolve and connect: %s", r)
	}
	if strings.Contains(stderr, "resolver path") || !f.auth.SawExactly("AlLoWeD.TeSt.") {
		t.Fatalf("kernel path: the query did not reach the upstream as sent (stderr %q)", stderr)
	}
	// Twin: the resolver path normalises the name.
	r, _ = f.probe(t, []string{"--allow", "allowed.test", "--dns-path", "resolver"}, "dns", authV4.String(), "53", "AlLoWeD.tEsT", "A", "udp")
	if r.Rcode != "NOERROR" || f.auth.SawExactly("AlLoWeD.tEsT.") {
		t.Fatalf("resolver path: %s (seen as sent: %v)", r, f.auth.SawExactly("AlLoWeD.tEsT."))
	}
}

// TestKernelPathIPv6Upstream: with an IPv6 upstream, IPv6 DNS takes the
// kernel path too: an allowed name goes straight to it (its case intact),
// the reply seems to come from the server the program asked, and a refused
// name gets a REFUSED that user space injects over IPv6, never forwarded.
func TestKernelPathIPv6Upstream(t *testing.T) {
	if os.Getenv("SLUICE_E2E_DNS_PATH") == "resolver" {
		t.Skip("SLUICE_E2E_DNS_PATH=resolver")
	}
	f := newFixture(t)
	auth6 := f.w.ServeDNS(t, netip.MustParseAddr("2001:db8:3::53"), world.Zone(zone))
	flags := []string{"--dns-upstream", "[2001:db8:3::53]:53", "--dns-path", "kernel", "--allow", "allowed.test"}
	r, stderr := f.probe(t, flags, "dns", foreignV6.String(), "53", "AlLoWeD.TeSt", "AAAA", "udp-unconnected")
	if !r.OK || !slices.Contains(r.Answers, world.AllowedV6.String()) || r.From != "[2001:db8:3::99]:53" {
		t.Fatalf("allowed name over IPv6: %s\n%s", r, stderr)
	}
	if !auth6.SawExactly("AlLoWeD.TeSt.") {
		t.Fatalf("the IPv6 upstream did not see the query as sent: the kernel path was not taken")
	}
	label := randomLabel()
	r, stderr = f.probe(t, flags, "dns", foreignV6.String(), "53", label+".denied.test", "A", "udp")
	if r.Rcode != "REFUSED" || r.From != "[2001:db8:3::99]:53" {
		t.Fatalf("refused name over IPv6: want REFUSED from the asked server, got %s\n%s", r, stderr)
	}
	if auth6.Saw(label) || f.auth.Saw(label) || f.foreign6.Count() != 0 {
		t.Fatalf("a refused name left the machine")
	}
}
