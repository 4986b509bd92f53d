// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"context"
	"errors"
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
)

// TestUserspaceResolver: with upstreams, a userspace session's proxy
// resolves allowed names through those servers only; without, it keeps
// the system's resolver; a bad upstream is refused before anything starts.
func TestUserspaceResolver(t *testing.T) {
	policy, err := allowlist.Parse([]byte(`{"allowed_hosts": ["allowed.test"]}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := UserspaceConfig{Mode: ModeProxy, Policy: policy, Argv: []string{"true"}}

	u, err := StartUserspace(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if u.res != nil || !u.ProxyAddr().Addr().IsLoopback() {
		t.Errorf("without upstreams: resolver %v, proxy at %v; want the system's resolver (nil) and a loopback proxy", u.res, u.ProxyAddr())
	}
	u.Close()
	bad := cfg
	bad.DNS = &dnsresolver.Config{Upstreams: []string{"dns.example"}}
	if _, err := StartUserspace(bad); err == nil || !strings.Contains(err.Error(), `"dns.example"`) || KindOf(err) != Invalid {
		t.Fatalf("a name as upstream: %v (kind %v), want an Invalid error naming it", err, KindOf(err))
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

	good := cfg
	good.DNS = &dnsresolver.Config{Upstreams: []string{pc.LocalAddr().String()}}
	u, err = StartUserspace(good)
	if err != nil || u.res == nil {
		t.Fatalf("with upstreams: %v, resolver %v", err, u)
	}
	defer u.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := u.res.LookupNetIP(ctx, "allowed.test")
	if err != nil || !slices.Equal(got, []netip.Addr{netip.MustParseAddr("203.0.113.10")}) {
		t.Fatalf("allowed.test: %v, %v", got, err)
	}
	if _, err := u.res.LookupNetIP(ctx, "other.test"); !errors.Is(err, dnsresolver.ErrRefused) {
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

// A session needs a command.
func TestUserspaceNeedsACommand(t *testing.T) {
	p, err := allowlist.FromStrings(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StartUserspace(UserspaceConfig{Mode: ModeProxy, Policy: p}); KindOf(err) != Invalid {
		t.Fatalf("no argv: %v, want an Invalid error", err)
	}
}
