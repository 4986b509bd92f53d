// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/proxy"
	"github.com/sluice-dev/sluice/report"
)

// TestUserspaceResolver: with --dns-upstream, a userspace session's proxy
// resolves allowed names through those servers only; without, it keeps the
// system's resolver; a bad upstream is refused before anything starts.
func TestUserspaceResolver(t *testing.T) {
	policy, err := allowlist.Parse([]byte(`{"allowed_hosts": ["allowed.test"]}`))
	if err != nil {
		t.Fatal(err)
	}
	rep := report.New(io.Discard)
	audit := &report.AuditLog{}

	r, err := userspaceResolver(runOptions{}, policy, rep, audit)
	if err != nil || r != nil {
		t.Fatalf("without --dns-upstream: %v, %v; want the system's resolver (nil)", r, err)
	}
	if cfg := withResolver(proxy.Config{}, nil); cfg.Resolve != nil {
		t.Error("withResolver(nil) set a resolver")
	}
	if _, err := userspaceResolver(runOptions{dnsFlags: dnsFlags{dnsUpstreams: []string{"dns.example"}}}, policy, rep, audit); err == nil || !strings.Contains(err.Error(), "--dns-upstream") {
		t.Fatalf("a name as upstream: %v", err)
	}

	// A DNS server on loopback that logs what it is asked.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		q := req.Question[0]
		mu.Lock()
		asked = append(asked, q.Name)
		mu.Unlock()
		if q.Qtype == dns.TypeA {
			rr, _ := dns.NewRR(q.Name + " 60 IN A 203.0.113.10")
			m.Answer = append(m.Answer, rr)
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })

	o := runOptions{dnsFlags: dnsFlags{dnsUpstreams: []string{pc.LocalAddr().String()}}}
	r, err = userspaceResolver(o, policy, rep, audit)
	if err != nil || r == nil {
		t.Fatalf("with --dns-upstream: %v, %v", r, err)
	}
	defer r.Close()
	cfg := withResolver(proxy.Config{}, r)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := cfg.Resolve(ctx, "allowed.test")
	if err != nil || !slices.Equal(got, []netip.Addr{netip.MustParseAddr("203.0.113.10")}) {
		t.Fatalf("allowed.test: %v, %v", got, err)
	}
	if _, err := cfg.Resolve(ctx, "other.test"); !errors.Is(err, dnsresolver.ErrRefused) {
		t.Fatalf("other.test: %v, want refused", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range asked {
		if name != "allowed.test." {
			t.Errorf("the upstream was asked %q", name)
		}
	}
	if len(asked) != 2 {
		t.Errorf("the upstream was asked %v, want allowed.test A and AAAA", asked)
	}
}
