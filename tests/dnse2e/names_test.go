// SPDX-License-Identifier: Apache-2.0

//go:build linux

package dnse2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// The shared-address escape (issue 18): cdn.test is allowed, evil.test is
// not, and both are served by one CDN address, which routes by SNI and
// Host. Every refusal below has its unconfined twin showing that the
// world does deliver the denied name on that address without sluice.
var (
	cdnV4 = netip.MustParseAddr("203.0.113.30")
	cdnV6 = netip.MustParseAddr("2001:db8:2::30")
)

// unconfined runs a probe action in the client namespace without sluice.
func (f *fixture) unconfined(t *testing.T, action ...string) world.ProbeResult {
	t.Helper()
	return f.w.RunProbe(t, nil, action...)
}

// cdnFamilies are the CDN's two addresses with their probe family.
var cdnFamilies = []struct {
	fam  string
	addr netip.Addr
}{{"4", cdnV4}, {"6", cdnV6}}

func TestSNIOfAnotherNameIsRefused(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4, cdnV6)
	allow := []string{"--allow", "cdn.test"}
	for _, c := range cdnFamilies {
		// The twin: without sluice the CDN delivers evil.test on the
		// address it shares with cdn.test.
		if r := f.unconfined(t, "tls-name", c.addr.String(), c.fam, "443", "evil.test"); !r.OK || !strings.Contains(r.Reply, "200") {
			t.Fatalf("IPv%s unconfined: %s", c.fam, r)
		}
		if !cdn.Saw("evil.test") {
			t.Fatalf("IPv%s unconfined: the CDN recorded no ClientHello for evil.test", c.fam)
		}
	}
	cdn = f.w.ServeCDNReset(cdn)
	for _, c := range cdnFamilies {
		r, stderr := f.probe(t, allow, "tls-name", "cdn.test", c.fam, "443", "evil.test")
		if r.OK {
			t.Errorf("IPv%s: the handshake with SNI evil.test went through: %s", c.fam, r)
		}
		want := "refused probe["
		line := fmt.Sprintf("-> %s (TLS SNI evil.test): %s", netip.AddrPortFrom(c.addr, 443), allowedFor("cdn.test"))
		if !strings.Contains(stderr, want) || !strings.Contains(stderr, line) {
			t.Errorf("IPv%s: no explained refusal (%q) in:\n%s", c.fam, line, stderr)
		}
		// Port 443 is judged in the kernel, on the client's own socket:
		// its send of the ClientHello is refused.
		if r.Errno != "EACCES" {
			t.Errorf("IPv%s: the client got %s, want its ClientHello's send refused (EACCES)", c.fam, r)
		}
		// The allowed name on the same address works, and getpeername
		// shows the address the program connected to.
		r, _ = f.probe(t, allow, "tls-name", "cdn.test", c.fam, "443", "cdn.test")
		if !r.OK || !strings.Contains(r.Reply, "200") {
			t.Errorf("IPv%s: cdn.test: %s", c.fam, r)
		}
		if r.From != netip.AddrPortFrom(c.addr, 443).String() {
			t.Errorf("IPv%s: getpeername shows %q, want %s", c.fam, r.From, netip.AddrPortFrom(c.addr, 443))
		}
	}
	if cdn.Saw("evil.test") {
		t.Fatalf("the CDN received a ClientHello or request for evil.test: %q %q", cdn.SNIs(), cdn.Hosts())
	}
	if !cdn.Saw("cdn.test") {
		t.Fatalf("the CDN never saw cdn.test: %q", cdn.SNIs())
	}
}

func TestHostOfAnotherNameIsRefused(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4, cdnV6)
	allow := []string{"--allow", "cdn.test"}
	for _, c := range cdnFamilies {
		if r := f.unconfined(t, "http-name", c.addr.String(), c.fam, "80", "evil.test"); !r.OK || !cdn.Saw("evil.test") {
			t.Fatalf("IPv%s unconfined: %s, hosts %q", c.fam, r, cdn.Hosts())
		}
	}
	cdn = f.w.ServeCDNReset(cdn)
	for _, c := range cdnFamilies {
		r, stderr := f.probe(t, allow, "http-name", "cdn.test", c.fam, "80", "evil.test")
		if r.OK {
			t.Errorf("IPv%s: Host evil.test went through: %s", c.fam, r)
		}
		if line := fmt.Sprintf("-> %s (HTTP Host evil.test): %s", netip.AddrPortFrom(c.addr, 80), allowedFor("cdn.test")); !strings.Contains(stderr, line) {
			t.Errorf("IPv%s: no explained refusal (%q) in:\n%s", c.fam, line, stderr)
		}
		// Port 80 is judged in the kernel too: the request's send is
		// refused.
		if r.Errno != "EACCES" {
			t.Errorf("IPv%s: the client got %s, want its request's send refused (EACCES)", c.fam, r)
		}
		r, _ = f.probe(t, allow, "http-name", "cdn.test", c.fam, "80", "cdn.test")
		if !r.OK || !strings.Contains(r.Reply, "200") {
			t.Errorf("IPv%s: cdn.test: %s", c.fam, r)
		}
	}
	if cdn.Saw("evil.test") {
		t.Fatalf("the CDN received a request for evil.test: %q", cdn.Hosts())
	}
}

func TestClientHelloWithoutSNIIsRefused(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4)
	if r := f.unconfined(t, "tls-name", cdnV4.String(), "4", "443", "-"); !r.OK || len(cdn.SNIs()) != 1 {
		t.Fatalf("unconfined: %s, SNIs %q", r, cdn.SNIs())
	}
	cdn = f.w.ServeCDNReset(cdn)
	r, stderr := f.probe(t, []string{"--allow", "cdn.test"}, "tls-name", "cdn.test", "4", "443", "-")
	if r.OK || !strings.Contains(stderr, "(TLS SNI): a ClientHello without SNI names no host") {
		t.Fatalf("no SNI: %s\n%s", r, stderr)
	}
	if n := len(cdn.SNIs()); n != 0 {
		t.Fatalf("the CDN received %d ClientHellos", n)
	}
}

func TestEncryptedClientHelloIsRefused(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4)
	// An outer SNI that is not allowed (the CDN's public name), and one
	// that is: the inner name, which the CDN routes by, is hidden either way.
	for _, outer := range []string{"public.test", "cdn.test"} {
		_ = f.unconfined(t, "tls-ech", cdnV4.String(), "4", "443", "evil.test", outer)
		if !cdn.Saw(outer) {
			t.Fatalf("unconfined: the CDN did not record the outer SNI %s: %q", outer, cdn.SNIs())
		}
	}
	cdn = f.w.ServeCDNReset(cdn)
	for _, outer := range []string{"public.test", "cdn.test"} {
		_, stderr := f.probe(t, []string{"--allow", "cdn.test"}, "tls-ech", "cdn.test", "4", "443", "evil.test", outer)
		want := "(TLS SNI " + outer + "): the ClientHello carries an Encrypted ClientHello"
		if outer == "public.test" {
			want = "(TLS SNI public.test): " + allowedFor("cdn.test")
		}
		if !strings.Contains(stderr, want) {
			t.Errorf("outer %s: no %q in:\n%s", outer, want, stderr)
		}
	}
	if n := len(cdn.SNIs()); n != 0 {
		t.Fatalf("the CDN received %d ClientHellos: %q", n, cdn.SNIs())
	}
}

func TestAddressEntryIsReachedWithAnySNI(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4)
	r, _ := f.probe(t, []string{"--allow", cdnV4.String()}, "tls-name", cdnV4.String(), "4", "443", "evil.test")
	if !r.OK || !cdn.Saw("evil.test") {
		t.Fatalf("an IP entry is judged by address: %s, SNIs %q", r, cdn.SNIs())
	}
}

// writePolicy writes an allowlist file readable by the session's user.
func writePolicy(t *testing.T, body string) string {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "allowlist.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOtherPortsFollowTheVerifyRule(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4)
	port := f.w.ListenTCP(t, cdnV4)
	contacts := func() int {
		n := 0
		for _, c := range f.w.Contacts() {
			if c.Local == netip.AddrPortFrom(cdnV4, port) {
				n++
			}
		}
		return n
	}
	banner := "SSH-2.0-probe"
	if r := f.unconfined(t, "send-name", cdnV4.String(), "4", fmt.Sprint(port), banner); !r.OK || contacts() != 1 {
		t.Fatalf("unconfined: %s", r)
	}
	// The default: a protocol other than TLS and HTTP passes on a port
	// other than 80 and 443.
	r, _ := f.probe(t, []string{"--allow", "cdn.test"}, "send-name", "cdn.test", "4", fmt.Sprint(port), banner)
	if !r.OK || r.Reply != world.Greeting || contacts() != 2 {
		t.Fatalf("default rule, SSH-like to a learned address: %s (contacts %d)", r, contacts())
	}
	// "verify": "name": every port by name; an SSH banner names none.
	// The kernel judges the client's first bytes on its own connection:
	// the handshake to the allowed address is made, no byte reaches the
	// server (the line service records what clients send).
	line := fmt.Sprint(world.LinePort)
	cdn = f.w.ServeCDNReset(cdn)
	if r := f.unconfined(t, "send-name", cdnV4.String(), "4", line, banner); !r.OK || len(cdn.Lines()) != 1 {
		t.Fatalf("unconfined, to the line service: %s (lines %q)", r, cdn.Lines())
	}
	cdn = f.w.ServeCDNReset(cdn)
	p := writePolicy(t, `{"allowed_hosts": [{"host": "cdn.test", "verify": "name"}]}`)
	r, stderr := f.probe(t, []string{"--allowlist", p}, "send-name", "cdn.test", "4", line, banner)
	if r.OK || !strings.Contains(stderr, "(no host name): the first bytes are neither a TLS ClientHello nor an HTTP/1 request") {
		t.Fatalf(`"verify": "name": %s\n%s`, r, stderr)
	}
	time.Sleep(100 * time.Millisecond)
	if l := cdn.Lines(); len(l) != 0 {
		t.Fatalf(`"verify": "name": the server read %q`, l)
	}
	// "verify": "address": by address, even on 443 with another SNI.
	p = writePolicy(t, `{"allowed_hosts": [{"host": "cdn.test", "verify": "address"}]}`)
	r, _ = f.probe(t, []string{"--allowlist", p}, "tls-name", "cdn.test", "4", "443", "evil.test")
	if !r.OK {
		t.Fatalf(`"verify": "address": %s`, r)
	}
}

func TestQUICToLearnedAddressIsRefused(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4, cdnV6)
	for _, c := range cdnFamilies {
		if r := f.unconfined(t, "udp-name", c.addr.String(), c.fam, "443"); !r.OK {
			t.Fatalf("IPv%s unconfined: %s", c.fam, r)
		}
	}
	if cdn.QUIC() != 2 {
		t.Fatalf("unconfined: %d datagrams", cdn.QUIC())
	}
	for _, c := range cdnFamilies {
		r, stderr := f.probe(t, []string{"--allow", "cdn.test"}, "udp-name", "cdn.test", c.fam, "443")
		if r.OK || r.Errno != "EPERM" || !strings.Contains(stderr, "QUIC") {
			t.Errorf("IPv%s: %s\n%s", c.fam, r, stderr)
		}
	}
	if cdn.QUIC() != 2 {
		t.Fatalf("the CDN received %d QUIC datagrams under sluice", cdn.QUIC()-2)
	}
	// The opt-in: an entry judged by address.
	p := writePolicy(t, `{"allowed_hosts": [{"host": "cdn.test", "verify": "address"}]}`)
	if r, _ := f.probe(t, []string{"--allowlist", p}, "udp-name", "cdn.test", "4", "443"); !r.OK || cdn.QUIC() != 3 {
		t.Fatalf(`"verify": "address": %s, %d datagrams`, r, cdn.QUIC())
	}
}

// allowedFor is the end of a refusal's explanation: the names the address
// was learned for, on every DNS path (the kernel path's from
// kdns_learned_from).
func allowedFor(name string) string {
	return "the address was allowed for " + name
}
