// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Package dnse2e tests DNS learning end to end: a confined program resolves
// names through whatever resolver it likes, sluice's resolver answers, and
// only what it learned becomes reachable. An authoritative server for the
// "test." zone runs in the world namespace and logs every query name, so a
// test can show that a refused name never left the machine.
package dnse2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

var (
	sluiceBin string
	instance  string
	// Addresses in the world: the upstream the sessions use, and a
	// "foreign" resolver a program may try instead.
	authV4    = netip.MustParseAddr("203.0.113.53")
	foreignV4 = netip.MustParseAddr("203.0.113.99")
	foreignV6 = netip.MustParseAddr("2001:db8:3::99")
)

func TestMain(m *testing.M) {
	code := func() int {
		if code, ready := needs.Main(m, "dnse2e", needs.Kernel...); !ready {
			return code // every test skips, or one failure under SLUICE_REQUIRE_KERNEL=1
		}
		bin, inst, cleanup, err := world.SluiceForTests("sluice-dnse2e")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cleanup()
		sluiceBin, instance = bin, inst
		defer world.RemoveProbe()
		return m.Run()
	}()
	os.Exit(code)
}

// zone is the authoritative data of the world's DNS server.
var zone = map[string][]string{
	"allowed.test.":      {"A 203.0.113.10", "AAAA 2001:db8:2::10"},
	"allowed6.test.":     {"AAAA 2001:db8:2::10"},
	"denied.test.":       {"A 203.0.113.20"},
	"cname.test.":        {"CNAME target.other.test."},
	"target.other.test.": {"A 203.0.113.10"},
	"rebind-lo.test.":    {"A 127.0.0.1"},
	"rebind-meta.test.":  {"A 169.254.169.254"},
	"rebind-priv.test.":  {"A 10.0.0.5"},
	"short.test.":        {"2 A 203.0.113.10"},
	"many.test.":         {"A 203.0.113.101", "A 203.0.113.102", "A 203.0.113.103", "A 203.0.113.104", "A 203.0.113.105"},
	"a.wild.test.":       {"A 203.0.113.10"},
	"x.y.wild.test.":     {"A 203.0.113.10"},
	"wild.test.":         {"A 203.0.113.10"},
	"second.test.":       {"A 203.0.113.20"},
	// One CDN address serving an allowed and a denied name (names_test.go).
	"cdn.test.":  {"A 203.0.113.30", "AAAA 2001:db8:2::30"},
	"evil.test.": {"A 203.0.113.30", "AAAA 2001:db8:2::30"},
}

// fixture is a world with the authoritative server and a foreign resolver.
type fixture struct {
	w        *world.World
	auth     *world.DNSServer
	foreign  *world.DNSServer
	foreign6 *world.DNSServer
	port     uint16 // TCP server on AllowedV4
	denied   uint16 // TCP server on DeniedV4
	port6    uint16 // TCP server on AllowedV6
}

func newFixture(t *testing.T) *fixture {
	w := world.New(t)
	f := &fixture{w: w}
	f.auth = w.ServeDNS(t, authV4, world.Zone(zone))
	foreign := func(q dns.Question) []dns.RR {
		rr, _ := dns.NewRR(q.Name + " 60 IN A 203.0.113.66")
		return []dns.RR{rr}
	}
	f.foreign = w.ServeDNS(t, foreignV4, foreign)
	f.foreign6 = w.ServeDNS(t, foreignV6, foreign)
	f.port = w.ListenTCP(t, world.AllowedV4)
	f.denied = w.ListenTCP(t, world.DeniedV4)
	f.port6 = w.ListenTCP(t, world.AllowedV6)
	return f
}

// run runs `sluice run` in the client namespace with flags, the command
// being the shell script or probe given after them; it returns stdout,
// stderr and the exit status.
func (f *fixture) run(t *testing.T, flags []string, command ...string) (string, string, int) {
	t.Helper()
	return f.sluice(t, "run", flags, command...)
}

// sluice is run with another subcommand that takes run's flags (learn).
func (f *fixture) sluice(t *testing.T, sub string, flags []string, command ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{sub, "--user", "65534:65534", "--dns-upstream", authV4.String()}, dnsPathFlags()...)
	args = append(args, flags...)
	args = append(args, "--")
	args = append(args, command...)
	c := f.w.ClientCmd(ctx, sluiceBin, args...)
	c.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("sluice run: %v", err)
		}
		code = ee.ExitCode()
	}
	t.Logf("sluice %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out.String(), errb.String())
	return out.String(), errb.String(), code
}

// probe runs one probe action confined and returns its result.
func (f *fixture) probe(t *testing.T, flags []string, action ...string) (world.ProbeResult, string) {
	t.Helper()
	out, stderr, _ := f.run(t, flags, append([]string{world.BuildProbe(t)}, action...)...)
	r, err := world.ParseProbeResult([]byte(out))
	if err != nil {
		t.Fatalf("probe %v: %v", action, err)
	}
	return r, stderr
}

// results parses every JSON line a confined shell script printed.
func results(t *testing.T, out string) []world.ProbeResult {
	t.Helper()
	var rs []world.ProbeResult
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		r, err := world.ParseProbeResult([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// dnsPathFlags runs every test on the DNS path SLUICE_E2E_DNS_PATH names
// (auto, kernel or resolver; empty: sluice's default, auto), so that CI runs the
// package once per path.
func dnsPathFlags() []string {
	if p := os.Getenv("SLUICE_E2E_DNS_PATH"); p != "" {
		return []string{"--dns-path", p}
	}
	return nil
}

func randomLabel() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "x" + hex.EncodeToString(b[:])
}
