// SPDX-License-Identifier: Apache-2.0

//go:build linux

package dnse2e

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/sluice-dev/sluice/tests/world"
)

// The kernel DNS path's leak tests (issue 19): ways of sending a query
// that the egress program could judge on other bytes than the upstream
// reads. Each attack first runs unconfined, to show that the world's
// server would log the unlisted name without sluice, then confined; the
// confined case passes only when the world logged nothing, whatever the
// client saw. A positive control in the same session shows that allowed
// queries still reach the upstream.

// leakPathFlags is the DNS path the leak tests confine with: the one
// SLUICE_E2E_DNS_PATH names, the kernel path when it names none (the
// leaks are the kernel path's; the resolver path must not have them
// either).
func leakPathFlags() []string {
	p := os.Getenv("SLUICE_E2E_DNS_PATH")
	if p == "" {
		p = "kernel"
	}
	return []string{"--dns-path", p}
}

// shortLabel is a random label of 7 characters: short enough for the
// smuggled layouts below to fit in one 63-byte label.
func shortLabel() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "x" + hex.EncodeToString(b[:])
}

// wireQuery packs a standard query (RD set, class IN, type A) for the
// labels given, byte for byte: no escaping, no checks, so that a label can
// hold a '.' or a NUL.
func wireQuery(id uint16, labels ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, id)
	b = append(b, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0)
	for _, l := range labels {
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	return append(b, 0, 0, 1, 0, 1)
}

// gsoBackToBack is an allowed query followed by a query for inner, the
// first padded to inner's length: with UDP_SEGMENT set to that length the
// wire carries them as two datagrams.
func gsoBackToBack(t *testing.T, inner []byte) ([]byte, int) {
	t.Helper()
	pad := len(inner) - len(wireQuery(0, "", "wild", "test"))
	if pad < 1 || pad > 63 {
		t.Fatalf("inner query of %d bytes: no padding fits", len(inner))
	}
	first := wireQuery(0x5151, strings.Repeat("a", pad), "wild", "test")
	return append(first, inner...), len(inner)
}

// gsoSmuggled is one datagram that reads as a single query for a name
// under *.wild.test, whose first label holds inner whole; cut into
// segments of inner's length, the second segment is exactly inner. A judge
// that reads the whole datagram as one message, and lets any byte into a
// label, passes it; the upstream reads the second segment as a query of
// its own.
func gsoSmuggled(t *testing.T, inner []byte) ([]byte, int) {
	t.Helper()
	s := len(inner)
	fill := s - 13 // the rest of the first segment after the header and the label's length byte
	tail := []byte{4, 'w', 'i', 'l', 'd', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1}
	if fill < 0 || fill+s > 63 || len(tail) > s {
		t.Fatalf("inner query of %d bytes does not fit one label", s)
	}
	b := []byte{0x52, 0x52, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, byte(fill + s)}
	b = append(b, strings.Repeat("a", fill)...)
	b = append(b, inner...)
	b = append(b, tail...)
	return b, s
}

// TestKDNSGSOLeak: one sendmsg with UDP_SEGMENT (asked for with setsockopt
// or with a control message) carries several datagrams that the kernel
// splits after the cgroup egress hook ran. No layout of the segments may
// bring an unlisted name to the upstream.
func TestKDNSGSOLeak(t *testing.T) {
	f := newFixture(t)
	probe := world.BuildProbe(t)
	type attack struct {
		how    string // gso-sockopt or gso-cmsg
		layout string
		build  func(*testing.T, []byte) ([]byte, int)
	}
	var attacks []attack
	for _, how := range []string{"gso-sockopt", "gso-cmsg"} {
		attacks = append(attacks, attack{how, "back to back", gsoBackToBack}, attack{how, "smuggled in a label", gsoSmuggled})
	}
	// args is the probe's command line for a, asking for label.
	args := func(a attack, label string) []string {
		p, seg := a.build(t, wireQuery(0x6262, label, "denied", "test"))
		return []string{"-timeout", "1s", "dns-raw", authV4.String(), "53", fmt.Sprintf("%s:%d", a.how, seg), hex.EncodeToString(p)}
	}

	// Unconfined twins: the world's server logs the unlisted name, so
	// the attack is real and the confined run below can show something.
	for _, a := range attacks {
		label := shortLabel()
		if r := f.w.RunProbe(t, nil, args(a, label)...); !r.OK {
			t.Fatalf("%s via %s unconfined: the probe could not send: %s", a.layout, a.how, r)
		}
		if !waitSaw(f.auth, label) {
			t.Fatalf("%s via %s unconfined: the world never logged %s: the attack proves nothing", a.layout, a.how, label)
		}
	}

	// Confined: the same sends (fresh names) in one session, then an
	// allowed query.
	var script, labels []string
	for _, a := range attacks {
		label := shortLabel()
		labels = append(labels, label)
		script = append(script, probe+" "+strings.Join(args(a, label), " "))
	}
	script = append(script, fmt.Sprintf("%s dns %s 53 A.Wild.Test A udp", probe, authV4))
	out, stderr, _ := f.run(t, append([]string{"--allow", "*.wild.test"}, leakPathFlags()...), "sh", "-c", strings.Join(script, "; "))
	rs := results(t, out)
	if len(rs) != len(script) {
		t.Fatalf("want %d results, got %d:\n%s", len(script), len(rs), out)
	}
	time.Sleep(200 * time.Millisecond) // late datagrams, if any, reach the log
	for i, a := range attacks {
		if !rs[i].OK {
			t.Errorf("%s via %s confined: the probe could not send: %s", a.layout, a.how, rs[i])
		}
		if f.auth.Saw(labels[i]) {
			t.Errorf("%s via %s confined: the world's server logged %s: an unlisted name left the machine", a.layout, a.how, labels[i])
		}
	}
	// The kernel path's drop is explained, naming the process.
	if leakPathFlags()[1] == "kernel" && !strings.Contains(stderr, "refused DNS send to the upstream: several datagrams in one send (UDP GSO)") {
		t.Errorf("the kernel path dropped GSO sends without a line saying so:\n%s", stderr)
	}
	// Positive control: an allowed query in the same session still
	// reaches the upstream and is answered.
	allowedAfter(t, f, rs[len(rs)-1], "A.Wild.Test.")
}

// allowedAfter is the positive control of a leak test: the allowed query
// the session sent after the attacks (the probe's result r) was answered
// and reached the upstream; on the kernel path as the program spelled it
// (the kernel passed it), on the resolver path normalised.
func allowedAfter(t *testing.T, f *fixture, r world.ProbeResult, name string) {
	t.Helper()
	if r.Rcode != "NOERROR" || !(f.auth.SawExactly(name) || f.auth.SawExactly(strings.ToLower(name))) {
		t.Fatalf("allowed query %s after the attacks: %s, forwarded as sent: %v", name, r, f.auth.SawExactly(name))
	}
	if leakPathFlags()[1] == "kernel" && !f.auth.SawExactly(name) {
		t.Fatalf("allowed query %s after the attacks did not take the kernel path", name)
	}
}

// waitSaw waits up to a second for the world's server to log substr.
func waitSaw(s *world.DNSServer, substr string) bool {
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if s.Saw(substr) {
			return true
		}
	}
	return false
}

// TestKDNSOddLabelLeak: a label under an allowed wildcard that holds a
// byte the resolver path refuses (a '.', a NUL, a space, a backslash, a
// byte above 127) or starts or ends with '-' was forwarded verbatim by the
// kernel path; an upstream that flattens names to text reads
// "x.denied.test" in one label as a name in another zone. The resolver
// refuses such names, so the kernel must hand them to it.
func TestKDNSOddLabelLeak(t *testing.T) {
	f := newFixture(t)
	probe := world.BuildProbe(t)
	odd := []struct {
		what  string
		label func(string) string
	}{
		{"a dot", func(l string) string { return l + ".denied.test" }},
		{"a NUL", func(l string) string { return l + "\x00denied" }},
		{"a space", func(l string) string { return l + " x" }},
		{"a backslash", func(l string) string { return l + `\` }},
		{"a byte above 127", func(l string) string { return l + "\xff" }},
		{"a leading '-'", func(l string) string { return "-" + l }},
		{"a trailing '-'", func(l string) string { return l + "-" }},
	}
	args := func(label string) []string {
		return []string{"-timeout", "1s", "dns-raw", authV4.String(), "53", "plain", hex.EncodeToString(wireQuery(0x7373, label, "wild", "test"))}
	}
	for _, o := range odd {
		l := shortLabel()
		if r := f.w.RunProbe(t, nil, args(o.label(l))...); !r.OK {
			t.Fatalf("%s unconfined: the probe could not send: %s", o.what, r)
		}
		if !waitSaw(f.auth, l) {
			t.Fatalf("%s unconfined: the world never logged %s: the attack proves nothing", o.what, l)
		}
	}

	var script, labels []string
	for _, o := range odd {
		l := shortLabel()
		labels = append(labels, l)
		script = append(script, probe+" "+strings.Join(args(o.label(l)), " "))
	}
	// Positive controls: '_' and '-' inside a label are host-name bytes,
	// and an allowed name is answered.
	script = append(script, probe+" "+strings.Join(args("Ok_x-9"), " "))
	script = append(script, fmt.Sprintf("%s dns %s 53 A.Wild.Test A udp", probe, authV4))
	out, _, _ := f.run(t, append([]string{"--allow", "*.wild.test"}, leakPathFlags()...), "sh", "-c", strings.Join(script, "; "))
	rs := results(t, out)
	if len(rs) != len(script) {
		t.Fatalf("want %d results, got %d:\n%s", len(script), len(rs), out)
	}
	time.Sleep(200 * time.Millisecond)
	for i, o := range odd {
		if f.auth.Saw(labels[i]) {
			t.Errorf("%s confined: the world's server logged %s: a name the resolver refuses left the machine", o.what, labels[i])
		}
		if rs[i].Rcode != "REFUSED" {
			t.Errorf("%s confined: want REFUSED, as the resolver answers, got %s", o.what, rs[i])
		}
	}
	if !f.auth.Saw("ok_x-9.wild.test.") {
		t.Errorf("Ok_x-9.wild.test: '_' and '-' are host-name bytes, but the query never reached the upstream: %s", rs[len(odd)])
	}
	allowedAfter(t, f, rs[len(rs)-1], "A.Wild.Test.")
}

// TestKDNSCorkedQuery: a query written in two parts, with MSG_MORE or
// under UDP_CORK, leaves as one datagram, and the egress program judges
// that datagram whole, not the part written first: an allowed query split
// so still reaches the upstream (on the kernel path spelled as sent: the
// kernel passed it), and a query for an unlisted name split after its
// first label (whose first part alone reads as nothing) never does.
func TestKDNSCorkedQuery(t *testing.T) {
	f := newFixture(t)
	probe := world.BuildProbe(t)
	args := func(how string, split int, q []byte) []string {
		return []string{"-timeout", "1s", "dns-raw", authV4.String(), "53", fmt.Sprintf("%s:%d", how, split), hex.EncodeToString(q)}
	}
	hows := []string{"more", "cork"}
	for _, how := range hows {
		l := shortLabel()
		if r := f.w.RunProbe(t, nil, args(how, 20, wireQuery(0x7474, l, "denied", "test"))...); !r.OK {
			t.Fatalf("%s unconfined: the probe could not send: %s", how, r)
		}
		if !waitSaw(f.auth, l) {
			t.Fatalf("%s unconfined: the world never logged %s: the parts did not make one query", how, l)
		}
	}
	var script, labels []string
	for _, how := range hows {
		l := shortLabel()
		labels = append(labels, l)
		script = append(script, probe+" "+strings.Join(args(how, 20, wireQuery(0x7474, l, "denied", "test")), " "))
	}
	// One spelling per way, so that each positive control is seen apart.
	allowed := []string{"A.Wild.Test.", "a.WILD.test."}
	for i, how := range hows {
		script = append(script, probe+" "+strings.Join(args(how, 20, wireQuery(0x7575, strings.Split(strings.TrimSuffix(allowed[i], "."), ".")...)), " "))
	}
	out, _, _ := f.run(t, append([]string{"--allow", "*.wild.test"}, leakPathFlags()...), "sh", "-c", strings.Join(script, "; "))
	rs := results(t, out)
	if len(rs) != len(script) {
		t.Fatalf("want %d results, got %d:\n%s", len(script), len(rs), out)
	}
	time.Sleep(200 * time.Millisecond)
	for i, how := range hows {
		if f.auth.Saw(labels[i]) {
			t.Errorf("%s confined: the world's server logged %s: an unlisted name left the machine", how, labels[i])
		}
		allowedAfter(t, f, rs[len(hows)+i], allowed[i])
	}
}

// TestKDNSFragmentedQuery: a query larger than the path's MTU leaves as IP
// fragments. The cgroup egress hook runs before the kernel fragments the
// datagram, so it judges the whole query that the upstream reassembles: an
// allowed long name still passes in the kernel, and an unlisted one is
// never seen (its unconfined twin is, so the fragments did carry it).
func TestKDNSFragmentedQuery(t *testing.T) {
	f := newFixture(t)
	probe := world.BuildProbe(t)
	// The client's route to the upstream gets an MTU of 150 bytes: a
	// query of about 230 bytes goes out as two fragments.
	if err := f.w.InClient(func() error {
		link, err := netlink.LinkByName(world.ClientIface)
		if err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: &net.IPNet{IP: authV4.AsSlice(), Mask: net.CIDRMask(32, 32)},
			Gw: net.IP(world.WorldV4.AsSlice()), MTU: 150})
	}); err != nil {
		t.Fatalf("route with a small MTU: %v", err)
	}
	long := func(first string) []string {
		return []string{first, strings.Repeat("p", 63), strings.Repeat("q", 63), strings.Repeat("r", 60)}
	}
	args := func(labels ...string) []string {
		return []string{"-timeout", "1s", "dns-raw", authV4.String(), "53", "plain", hex.EncodeToString(wireQuery(0x7676, labels...))}
	}
	twin := shortLabel()
	if r := f.w.RunProbe(t, nil, args(append(long(twin), "denied", "test")...)...); !r.OK {
		t.Fatalf("unconfined: the probe could not send: %s", r)
	}
	if !waitSaw(f.auth, twin) {
		t.Fatalf("unconfined: the world never logged %s: the fragments did not make a query", twin)
	}
	// A non-first fragment carries no UDP header: the sniffer reads no port.
	if !f.w.WaitArrival(world.All(world.To(authV4), world.Proto(17), func(p world.Packet) bool { return p.DstPort == 0 }), time.Second) {
		t.Fatalf("unconfined: no fragment arrived: the query was not fragmented")
	}
	denied := shortLabel()
	allowed := append(long("Frag"), "Wild", "Test")
	script := []string{
		probe + " " + strings.Join(args(append(long(denied), "denied", "test")...), " "),
		probe + " " + strings.Join(args(allowed...), " "),
	}
	out, _, _ := f.run(t, append([]string{"--allow", "*.wild.test"}, leakPathFlags()...), "sh", "-c", strings.Join(script, "; "))
	rs := results(t, out)
	if len(rs) != len(script) {
		t.Fatalf("want %d results, got %d:\n%s", len(script), len(rs), out)
	}
	time.Sleep(200 * time.Millisecond)
	if f.auth.Saw(denied) {
		t.Errorf("confined: the world's server logged %s: an unlisted name left the machine in fragments", denied)
	}
	name := strings.Join(allowed, ".") + "."
	if !f.auth.SawExactly(name) && !(leakPathFlags()[1] == "resolver" && f.auth.SawExactly(strings.ToLower(name))) {
		t.Errorf("confined: the allowed long name did not reach the upstream (as sent, on the kernel path): %s", rs[1])
	}
}
