// SPDX-License-Identifier: Apache-2.0

//go:build linux

package dnse2e

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/tests/world"
)

// dupV4 is the world's misbehaving upstream of TestKDNSForgedWhileHandedOver.
var dupV4 = netip.MustParseAddr("203.0.113.54")

// serveTwice answers every UDP query on addr:53 twice, back to back, from
// the same address and port with the query's ID: first an answer the
// kernel DNS path cannot judge alone (a TTL above the session's maximum,
// which user space must clamp), then a forgery (a private address, which
// the rebinding guard would drop). It reports the clients it answered.
func serveTwice(t *testing.T, w *world.World, addr netip.Addr) {
	t.Helper()
	w.AddWorldAddr(t, addr)
	var pc net.PacketConn
	if err := w.InWorld(func() (err error) {
		pc, err = net.ListenPacket("udp", netip.AddrPortFrom(addr, 53).String())
		return err
	}); err != nil {
		t.Fatalf("world: DNS server on %v: %v", addr, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			req := new(dns.Msg)
			if req.Unpack(buf[:n]) != nil || len(req.Question) != 1 {
				continue
			}
			for _, rr := range []string{" 100000 IN A 203.0.113.10", " 60 IN A 10.0.0.5"} {
				m := new(dns.Msg)
				m.SetReply(req)
				if req.Question[0].Qtype == dns.TypeA {
					a, _ := dns.NewRR(req.Question[0].Name + rr)
					m.Answer = []dns.RR{a}
				}
				b, _ := m.Pack()
				_, _ = pc.WriteTo(b, from)
			}
		}
	}()
}

// TestKDNSForgedWhileHandedOver: while user space answers a query the
// kernel DNS path handed over, the kernel once passed any datagram from
// the upstream's address and port with the query's ID, unjudged, until
// user space's own answer came: a duplicate or a forgery (here, sent
// right behind the answer the kernel could not judge, with a private
// address) reached the client first. Only the answer user space injects
// (judged by the resolver, marked by its raw socket) may pass. The
// unconfined twin shows the world's server answers; with the ingress
// program's mark check taken out, this test's confined client read the
// forgery (10.0.0.5), which is how the hole was seen.
func TestKDNSForgedWhileHandedOver(t *testing.T) {
	f := newFixture(t)
	serveTwice(t, f.w, dupV4)
	probe := world.BuildProbe(t)
	// Twin: unconfined, the world's server answers.
	twin := f.w.RunProbe(t, nil, "dns", dupV4.String(), "53", "dup.test", "A", "udp")
	if !twin.OK || !slices.Contains(twin.Answers, "203.0.113.10") {
		t.Fatalf("unconfined twin: %s", twin)
	}
	for _, path := range []string{"kernel"} {
		c := startSluice(t, f, dupV4, []string{"--dns-path", path, "--allow", "dup.test"},
			probe, "-timeout", "3s", "dns", dupV4.String(), "53", "dup.test", "A", "udp")
		done := make(chan string, 1)
		go func() { done <- c.wait(t) }()
		var out string
		select {
		case out = <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("the session did not end")
		}
		rs := results(t, out)
		if len(rs) != 1 {
			t.Fatalf("%s path: want one result:\n%s", path, out)
		}
		if r := rs[0]; slices.Contains(r.Answers, "10.0.0.5") || !slices.Equal(r.Answers, []string{"203.0.113.10"}) {
			t.Fatalf("%s path: the client got %s: want only the judged answer (203.0.113.10), never the forgery (10.0.0.5)", path, r)
		}
	}
}
