// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestResolvConf(t *testing.T) {
	const conf = `# generated
nameserver 198.51.100.53
nameserver fe80::1%eth0
nameserver not-an-address
domain old.example
search default.svc.cluster.local svc.cluster.local. Cluster.Local
options ndots:5
`
	c, err := dns.ClientConfigFromReader(strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	ups := upstreamsOf(c)
	if want := []string{"198.51.100.53:53", "[fe80::1]:53"}; !slices.Equal(ups, want) {
		t.Errorf("upstreams %v, want %v", ups, want)
	}
	// The last search/domain line wins, as in glibc.
	if got, want := searchOf(c), []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}; !slices.Equal(got, want) {
		t.Errorf("search %v, want %v", got, want)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(path, []byte("nameserver 198.51.100.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := SearchDomains(path); len(got) != 0 {
		t.Errorf("no search line: %v", got)
	}
	if got := SearchDomains(filepath.Join(dir, "missing")); got != nil {
		t.Errorf("missing file: %v", got)
	}
	if _, err := SystemUpstreams(filepath.Join(dir, "missing")); err == nil || !errors.Is(err, ErrNoUpstream) {
		t.Errorf("missing file: %v", err)
	}
}

func TestSystemUpstreamsFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	conf := "; comment\n# nameserver 203.0.113.1\nnameserver 198.51.100.53 # primary\n  nameserver\t2001:db8::53\noptions ndots:2 timeout:1\nsearch Example.TEST.\n"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ups, err := SystemUpstreams(path)
	if want := []string{"198.51.100.53:53", "[2001:db8::53]:53"}; err != nil || !slices.Equal(ups, want) {
		t.Errorf("SystemUpstreams = %v, %v; want %v", ups, err, want)
	}
	if got := SearchDomains(path); !slices.Equal(got, []string{"example.test"}) {
		t.Errorf("SearchDomains = %v", got)
	}
	if err := os.WriteFile(path, []byte("# nothing\nnameserver dns.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := SystemUpstreams(path); err == nil || !strings.Contains(err.Error(), "no nameserver") || !errors.Is(err, ErrNoUpstream) {
		t.Errorf("no usable nameserver: %v", err)
	}
}
