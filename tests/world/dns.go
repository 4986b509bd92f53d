// SPDX-License-Identifier: Apache-2.0

//go:build linux

package world

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// AddWorldAddr gives the world namespace's loopback one more address (a
// DNS server, a "foreign" resolver), usable at once (no DAD).
func (w *World) AddWorldAddr(t testing.TB, a netip.Addr) {
	t.Helper()
	if !Safe(a) {
		t.Fatalf("world: refusing address %v outside the test ranges", a)
	}
	if err := w.InWorld(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		bits := a.BitLen()
		return netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, bits)}, Flags: unix.IFA_F_NODAD})
	}); err != nil {
		t.Fatalf("world: add %v: %v", a, err)
	}
}

// DNSServer is an authoritative server in the world that logs every query
// name it receives, so a test can show a name never left the machine.
type DNSServer struct {
	mu      sync.Mutex
	queries []string
	raw     []string // query names as they arrived
	answer  func(q dns.Question) []dns.RR
}

// Zone answers from a map of owner name (fully qualified, lower case) to
// records in presentation format without the owner ("A 203.0.113.10",
// "CNAME other.test.", or with a TTL first: "2 A 203.0.113.10"),
// following CNAMEs. The TTL defaults to 300.
func Zone(records map[string][]string) func(dns.Question) []dns.RR {
	var answer func(q dns.Question) []dns.RR
	answer = func(q dns.Question) []dns.RR {
		name := strings.ToLower(q.Name)
		recs, ok := records[name]
		if !ok {
			return nil
		}
		out := []dns.RR{}
		for _, r := range recs {
			ttl := "300"
			if f := strings.Fields(r); len(f) > 1 && f[0][0] >= '0' && f[0][0] <= '9' {
				ttl, r = f[0], strings.Join(f[1:], " ")
			}
			typ, _, _ := strings.Cut(r, " ")
			if typ != "CNAME" && dns.StringToType[typ] != q.Qtype {
				continue
			}
			rr, err := dns.NewRR(fmt.Sprintf("%s %s IN %s", name, ttl, r))
			if err != nil {
				continue
			}
			out = append(out, rr)
			if c, ok := rr.(*dns.CNAME); ok {
				out = append(out, answer(dns.Question{Name: c.Target, Qtype: q.Qtype, Qclass: q.Qclass})...)
			}
		}
		return out
	}
	return answer
}

// ServeDNS starts a DNS server (UDP and TCP, port 53) on addr in the world,
// adding addr to the world's loopback. t.Cleanup stops it.
func (w *World) ServeDNS(t testing.TB, addr netip.Addr, answer func(dns.Question) []dns.RR) *DNSServer {
	t.Helper()
	w.AddWorldAddr(t, addr)
	s := &DNSServer{answer: answer}
	if err := w.InWorld(func() error {
		hp := netip.AddrPortFrom(addr, 53).String()
		pc, err := net.ListenPacket("udp", hp)
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", hp)
		if err != nil {
			pc.Close()
			return err
		}
		for _, srv := range []*dns.Server{{PacketConn: pc, Handler: s}, {Listener: l, Handler: s}} {
			go func() { _ = srv.ActivateAndServe() }()
			t.Cleanup(func() { _ = srv.Shutdown() })
		}
		return nil
	}); err != nil {
		t.Fatalf("world: DNS server on %v: %v", addr, err)
	}
	return s
}

// ServeDNS implements dns.Handler.
func (s *DNSServer) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) == 1 {
		q := req.Question[0]
		s.mu.Lock()
		s.queries = append(s.queries, strings.ToLower(q.Name))
		s.raw = append(s.raw, q.Name)
		s.mu.Unlock()
		if m.Answer = s.answer(q); m.Answer == nil {
			m.Rcode = dns.RcodeNameError
		}
	}
	_ = w.WriteMsg(m)
}

// Saw reports whether a query name containing substr arrived.
func (s *DNSServer) Saw(substr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.queries {
		if strings.Contains(q, substr) {
			return true
		}
	}
	return false
}

// SawExactly reports whether a query for name arrived spelled exactly so
// (case included): a forwarding resolver normalises case, a query that went
// straight from the program keeps it.
func (s *DNSServer) SawExactly(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.raw {
		if q == name {
			return true
		}
	}
	return false
}

// Seen is the number of queries whose name contains substr.
func (s *DNSServer) Seen(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.queries {
		if strings.Contains(q, substr) {
			n++
		}
	}
	return n
}

// Count is the number of queries received.
func (s *DNSServer) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queries)
}
