// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/proxy"
	"github.com/sluice-dev/sluice/suggest"
)

func entryStrings(p *allowlist.Policy) []string {
	var out []string
	for _, e := range p.Entries() {
		out = append(out, e.String())
	}
	slices.Sort(out)
	return out
}

func TestSuggestion(t *testing.T) {
	base, err := allowlist.Parse([]byte(`{"allowed_hosts": ["api.example.com", "*.cdn.example", "198.51.100.0/24",
		{"host": "intranet.example", "allow_private": true, "owner": "team:a"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := New(&out)
	r.suggest = suggest.New(nil) // not this machine's resolv.conf
	// Kernel: an address dialled without a name; an expired learned one,
	// a refused socket and loopback suggest nothing.
	r.Report(audit.FromKernelBrief("", loader.Event{Reason: loader.ReasonNotAllowed, Addr: netip.MustParseAddr("203.0.113.7"), Port: 443, Proto: 6}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Reason: loader.ReasonNotAllowed, Addr: netip.MustParseAddr("::ffff:203.0.113.8"), Port: 443, Proto: 6}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Reason: loader.ReasonExpired, Addr: netip.MustParseAddr("203.0.113.9"), Port: 443, Proto: 6}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Reason: loader.ReasonSocketType}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Reason: loader.ReasonNotAllowed, Addr: netip.MustParseAddr("198.51.100.9"), Port: 80, Proto: 6, Audit: true}), nil)
	// DNS: a refused name (twice, in another case), a reverse lookup, an
	// invalid name, one already allowed by the wildcard, and rebinding.
	r.Report(audit.FromDNS("", dnsresolver.Event{Kind: dnsresolver.EventRefused, Name: "registry.npmjs.org", Reason: dnsresolver.ReasonNotAllowed}, ""), nil)
	r.Report(audit.FromDNS("", dnsresolver.Event{Kind: dnsresolver.EventRefused, Audit: true, Name: "Registry.NPMJS.org.", Reason: dnsresolver.ReasonNotAllowed}, ""), nil)
	r.Report(audit.FromDNS("", dnsresolver.Event{Kind: dnsresolver.EventRefused, Name: "7.113.0.203.in-addr.arpa", Reason: "reverse lookups are answered only for addresses this session learned"}, ""), nil)
	r.Report(audit.FromDNS("", dnsresolver.Event{Kind: dnsresolver.EventRefused, Name: "bad_name!", Reason: dnsresolver.ReasonNotAllowed}, ""), nil)
	r.Report(audit.FromDNS("", dnsresolver.Event{Kind: dnsresolver.EventRefused, Name: "img.cdn.example", Reason: dnsresolver.ReasonNotAllowed}, ""), nil)
	r.Report(audit.FromDNS("", dnsresolver.Event{Kind: dnsresolver.EventRebinding, Name: "api.example.com", Addr: netip.MustParseAddr("10.0.0.1")}, ""), nil)
	// Proxy: a name, an IP literal, a rebinding refusal.
	proxyEvent := ProxyEvents(r, &AuditLog{})
	proxyEvent(proxy.Event{Kind: proxy.EventRefused, Host: "github.com", Port: 443, Reason: "github.com is not in the allowlist"})
	proxyEvent(proxy.Event{Kind: proxy.EventRefused, Host: "2001:db8::5", Port: 443, Reason: "no entry covers it"})
	proxyEvent(proxy.Event{Kind: proxy.EventRefused, Host: "api.example.com", Port: 443, Reason: "api.example.com resolves only to addresses sluice refuses: 10.0.0.2 (DNS rebinding protection; ...)"})

	file := filepath.Join(t.TempDir(), "suggested.json")
	if err := r.suggest.Write(file, base, &out); err != nil {
		t.Fatal(err)
	}
	got, err := allowlist.Load(file)
	if err != nil {
		t.Fatalf("the suggestion does not load: %v", err)
	}
	want := []string{"*.cdn.example", "198.51.100.0/24", "2001:db8::5", "203.0.113.7", "203.0.113.8",
		"api.example.com", "github.com", "intranet.example", "registry.npmjs.org"}
	slices.Sort(want)
	if g := entryStrings(got); !slices.Equal(g, want) {
		t.Errorf("suggested %v, want %v", g, want)
	}
	// The base's options survive.
	if e, ok := got.MatchName("intranet.example"); !ok || !e.AllowPrivate || !slices.Equal(e.Owners, []string{"team:a"}) {
		t.Errorf("intranet.example lost its options: %+v", e)
	}
	msg := out.String()
	for _, w := range []string{"added github.com registry.npmjs.org 203.0.113.7 203.0.113.8 2001:db8::5;", "answers for api.example.com held"} {
		if !strings.Contains(msg, w) {
			t.Errorf("output lacks %q:\n%s", w, msg)
		}
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode: %v %v", fi, err)
	}
}

func TestSuggestionUnixSockets(t *testing.T) {
	base, err := allowlist.Parse([]byte(`{"allowed_hosts": ["api.example.com"], "unix_sockets": ["/run/user/*/pulse/native"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := New(&out)
	r.suggest = suggest.New(nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Hook: loader.HookUnixConnect, Reason: loader.ReasonNotAllowed, Unix: "/var/run/docker.sock", Audit: true}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Hook: loader.HookUnixSend, Reason: loader.ReasonNotAllowed, Unix: "@relay"}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Hook: loader.HookUnixConnect, Reason: loader.ReasonNotAllowed, Unix: "/run/user/1000/pulse/native"}), nil)
	r.Report(audit.FromKernelBrief("", loader.Event{Hook: loader.HookUnixConnect, Reason: loader.ReasonNotAllowed, Unix: "relative.sock"}), nil)
	r.Report(daemonEvent("unix:/run/containerd/containerd.sock", "unix"), nil)
	file := filepath.Join(t.TempDir(), "suggested.json")
	if err := r.suggest.Write(file, base, &out); err != nil {
		t.Fatal(err)
	}
	got, err := allowlist.Load(file)
	if err != nil {
		t.Fatalf("the suggestion does not load: %v", err)
	}
	want := []string{"/run/containerd/containerd.sock", "/run/user/*/pulse/native", "/var/run/docker.sock", "@relay"}
	if g := got.Local().UnixSockets; !slices.Equal(g, want) {
		t.Errorf("unix_sockets %v, want %v", g, want)
	}
	if !strings.Contains(out.String(), "unix:/var/run/docker.sock") {
		t.Errorf("output does not name the added socket:\n%s", out.String())
	}
}

func daemonEvent(dst, proto string) audit.Event {
	return audit.Event{Type: audit.EgressDenied, Dst: dst, Proto: proto, Reason: loader.ReasonNotAllowed.String(),
		Message: "denied x[1] -> " + dst + ": not in the allowlist"}
}
