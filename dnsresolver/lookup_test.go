// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/addrclass"
)

func lookup(t *testing.T, r *Resolver, host string) ([]netip.Addr, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.LookupNetIP(ctx, host)
}

func TestLookupNetIPAllowed(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	got, err := lookup(t, e.r, "api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{mustAddr("203.0.113.5"), mustAddr("2001:db8::5")}
	if !slices.Equal(got, want) {
		t.Fatalf("LookupNetIP = %v, want %v (IPv4 first)", got, want)
	}
	// Learned into the datapath before it was returned.
	learned := e.learner.addrs()
	for _, a := range want {
		if _, ok := learned[a]; !ok {
			t.Errorf("%v not learned: %v", a, learned)
		}
	}
	// The session's programs get the same answer from the same cache:
	// the upstream is not asked again.
	before := e.stub.count("api.example.com")
	if before != 2 {
		t.Fatalf("upstream saw %d queries for the name, want 2 (A, AAAA)", before)
	}
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		m := e.ask(t, "api.example.com.", qt)
		if rcode(m) != "NOERROR" || len(answerAddrs(m)) != 1 || !slices.Contains(want, answerAddrs(m)[0]) {
			t.Fatalf("UDP client after the lookup: %v", m)
		}
	}
	if n := e.stub.count("api.example.com"); n != before {
		t.Errorf("the UDP client's queries went upstream (%d -> %d): the cache is not shared", before, n)
	}
	if n := e.r.Stats().Cached.Load(); n < 2 {
		t.Errorf("%d answers counted as cached, want the client's two", n)
	}
}

func TestLookupNetIPAfterClient(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	m := e.ask(t, "API.example.com.", dns.TypeA)
	if rcode(m) != "NOERROR" {
		t.Fatalf("client: %v", m)
	}
	got, err := lookup(t, e.r, "api.example.com")
	if err != nil || !slices.Contains(got, mustAddr("203.0.113.5")) {
		t.Fatalf("LookupNetIP after a client's query = %v, %v", got, err)
	}
	// A from the cache, AAAA forwarded: three queries upstream in all.
	if n := e.stub.count("api.example.com"); n != 2 {
		t.Errorf("upstream saw %d queries, want 2", n)
	}
}

func TestLookupNetIPRefusedNeverForwarded(t *testing.T) {
	e := newEnv(t, zone{"evil.example.org. A": {"evil.example.org. 300 IN A 203.0.113.66"}}, nil)
	got, err := lookup(t, e.r, "evil.example.org")
	if !errors.Is(err, ErrRefused) || len(got) != 0 {
		t.Fatalf("LookupNetIP(evil.example.org) = %v, %v; want ErrRefused", got, err)
	}
	if !strings.Contains(err.Error(), ReasonNotAllowed) || strings.Count(err.Error(), ReasonNotAllowed) != 1 {
		t.Errorf("error %q: want the reason once", err)
	}
	if n := e.stub.count("evil.example.org"); n != 0 {
		t.Errorf("a refused name was forwarded %d times", n)
	}
	if len(e.events.of(EventRefused)) == 0 {
		t.Errorf("no refusal event: %v", e.events.all())
	}
}

func TestLookupNetIPRebinding(t *testing.T) {
	z := zone{
		"mixed.example.net. A":         {"mixed.example.net. 300 IN A 10.0.0.5", "mixed.example.net. 300 IN A 203.0.113.7"},
		"mixed.example.net. AAAA":      {"mixed.example.net. 300 IN AAAA ::1"},
		"inner.example.net. A":         {"inner.example.net. 300 IN A 169.254.169.254"},
		"inner.example.net. AAAA":      {"inner.example.net. 300 IN AAAA fe80::1"},
		"db.private.example.net. A":    {"db.private.example.net. 300 IN A 10.1.2.3"},
		"db.private.example.net. AAAA": {"db.private.example.net. 300 IN AAAA fd00::7"},
	}
	e := newEnv(t, z, nil)
	got, err := lookup(t, e.r, "mixed.example.net")
	if err != nil || !slices.Equal(got, []netip.Addr{mustAddr("203.0.113.7")}) {
		t.Fatalf("mixed: %v, %v; want only the public address", got, err)
	}
	if n := len(e.events.of(EventRebinding)); n != 2 {
		t.Errorf("%d rebinding events, want 2 (10.0.0.5, ::1): %v", n, e.events.all())
	}
	got, err = lookup(t, e.r, "inner.example.net")
	var re *addrclass.RefusedError
	if !errors.As(err, &re) || len(got) != 0 || len(re.Refused) != 2 || !strings.Contains(err.Error(), "169.254.169.254 (link-local (cloud metadata))") {
		t.Fatalf("only metadata and link-local addresses: %v, %v; want a RefusedError naming both", got, err)
	}
	// An answer left empty is not cached: asked again, the same refusal.
	if got, err = lookup(t, e.r, "inner.example.net"); !errors.As(err, &re) || len(got) != 0 {
		t.Fatalf("again: %v, %v; want the same RefusedError", got, err)
	}
	if _, ok := e.learner.addrs()[mustAddr("169.254.169.254")]; ok {
		t.Error("the metadata address was learned")
	}
	// allow_private on the entry lets the private address through.
	got, err = lookup(t, e.r, "db.private.example.net")
	if err != nil || !slices.Equal(got, []netip.Addr{mustAddr("10.1.2.3"), mustAddr("fd00::7")}) {
		t.Fatalf("allow_private: %v, %v", got, err)
	}
}

func TestLookupNetIPNotFound(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	_, err := lookup(t, e.r, "nothing.example.net")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Fatalf("NXDOMAIN: %v, want a not-found *net.DNSError", err)
	}
}

func TestLookupNetIPUpstreamDown(t *testing.T) {
	// An upstream that never answers.
	e := newEnv(t, apiZone, func(dns.ResponseWriter, *dns.Msg, bool) bool { return true }, func(c *Config) { c.Timeout = 200 * time.Millisecond })
	_, err := lookup(t, e.r, "api.example.com")
	if err == nil || errors.Is(err, ErrRefused) {
		t.Fatalf("upstream down: %v, want an upstream error", err)
	}
	if len(e.events.of(EventUpstreamFailed)) == 0 {
		t.Errorf("no upstream event: %v", e.events.all())
	}
}

func TestLookupNetIPLocalhost(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	got, err := lookup(t, e.r, "localhost")
	if err != nil || !slices.Equal(got, []netip.Addr{mustAddr("127.0.0.1"), mustAddr("::1")}) {
		t.Fatalf("localhost: %v, %v", got, err)
	}
	if len(e.stub.queries()) != 0 {
		t.Errorf("localhost was forwarded: %v", e.stub.queries())
	}
}
