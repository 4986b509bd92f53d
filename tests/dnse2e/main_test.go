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
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

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
		if os.Geteuid() != 0 {
			return m.Run() // every test skips with a message
		}
		dir, err := os.MkdirTemp("", "sluice-dnse2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		_ = os.Chmod(dir, 0o755)
		sluiceBin = filepath.Join(dir, "sluice")
		build := exec.Command("go", "build", "-o", sluiceBin, "github.com/sluice-dev/sluice/cmd/sluice")
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build sluice:", err)
			return 1
		}
		var rnd [4]byte
		_, _ = rand.Read(rnd[:])
		instance = "sluice-dnse2e-" + hex.EncodeToString(rnd[:])
		defer func() {
			c := exec.Command(sluiceBin, "cleanup")
			c.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance)
			if out, err := c.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "sluice cleanup: %v: %s\n", err, out)
			}
		}()
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
	"short.test.":        {"A 203.0.113.10"},
	"many.test.":         {"A 203.0.113.101", "A 203.0.113.102", "A 203.0.113.103", "A 203.0.113.104", "A 203.0.113.105"},
	"a.wild.test.":       {"A 203.0.113.10"},
	"x.y.wild.test.":     {"A 203.0.113.10"},
	"wild.test.":         {"A 203.0.113.10"},
	"second.test.":       {"A 203.0.113.20"},
}

// ttlOf gives short.test its 2-second TTL.
func ttlOf(name string) uint32 {
	if name == "short.test." {
		return 2
	}
	return 300
}

// dnsServer is a DNS server in the world that logs every query name.
type dnsServer struct {
	mu      sync.Mutex
	queries []string
	answer  func(q dns.Question) []dns.RR
}

func (s *dnsServer) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) == 1 {
		q := req.Question[0]
		s.mu.Lock()
		s.queries = append(s.queries, strings.ToLower(q.Name))
		s.mu.Unlock()
		m.Answer = s.answer(q)
		if m.Answer == nil {
			m.Rcode = dns.RcodeNameError
		}
	}
	_ = w.WriteMsg(m)
}

func (s *dnsServer) saw(substr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.queries {
		if strings.Contains(q, substr) {
			return true
		}
	}
	return false
}

func (s *dnsServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queries)
}

func zoneAnswer(q dns.Question) []dns.RR {
	name := strings.ToLower(q.Name)
	recs, ok := zone[name]
	if !ok {
		return nil
	}
	out := []dns.RR{}
	for _, r := range recs {
		typ, _, _ := strings.Cut(r, " ")
		if typ != "CNAME" && dns.StringToType[typ] != q.Qtype {
			continue
		}
		rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s", name, ttlOf(name), r))
		if err != nil {
			panic(err)
		}
		out = append(out, rr)
		if c, ok := rr.(*dns.CNAME); ok {
			out = append(out, zoneAnswer(dns.Question{Name: c.Target, Qtype: q.Qtype, Qclass: q.Qclass})...)
		}
	}
	return out
}

// fixture is a world with the authoritative server and a foreign resolver.
type fixture struct {
	w       *world.World
	auth    *dnsServer
	foreign *dnsServer
	port    uint16 // TCP server on AllowedV4
	denied  uint16 // TCP server on DeniedV4
	port6   uint16 // TCP server on AllowedV6
}

func newFixture(t *testing.T) *fixture {
	w := world.New(t)
	f := &fixture{w: w, auth: &dnsServer{answer: zoneAnswer}}
	f.foreign = &dnsServer{answer: func(q dns.Question) []dns.RR {
		rr, _ := dns.NewRR(q.Name + " 60 IN A 203.0.113.66")
		return []dns.RR{rr}
	}}
	if err := w.InWorld(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		for _, a := range []netip.Addr{authV4, foreignV4, foreignV6} {
			bits := 32
			if a.Is6() {
				bits = 128
			}
			addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, bits)}, Flags: unix.IFA_F_NODAD}
			if err := netlink.AddrAdd(lo, addr); err != nil {
				return fmt.Errorf("add %s: %w", a, err)
			}
		}
		for _, srv := range []struct {
			addr netip.Addr
			h    dns.Handler
		}{{authV4, f.auth}, {foreignV4, f.foreign}, {foreignV6, f.foreign}} {
			hp := netip.AddrPortFrom(srv.addr, 53).String()
			pc, err := net.ListenPacket("udp", hp)
			if err != nil {
				return err
			}
			l, err := net.Listen("tcp", hp)
			if err != nil {
				return err
			}
			for _, s := range []*dns.Server{{PacketConn: pc, Handler: srv.h}, {Listener: l, Handler: srv.h}} {
				go func() { _ = s.ActivateAndServe() }()
				t.Cleanup(func() { _ = s.Shutdown() })
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("world DNS servers: %v", err)
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"run", "--user", "65534:65534", "--dns-upstream", authV4.String()}, flags...)
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

func randomLabel() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "x" + hex.EncodeToString(b[:])
}
