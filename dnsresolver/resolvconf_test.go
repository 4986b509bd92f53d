package dnsresolver

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	ups, err := parseResolvConf(bufio.NewScanner(strings.NewReader(conf)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"198.51.100.53:53", "[fe80::1]:53"}; !slices.Equal(ups, want) {
		t.Errorf("upstreams %v, want %v", ups, want)
	}
	// The last search/domain line wins, as in glibc.
	if got, want := parseSearch(bufio.NewScanner(strings.NewReader(conf))), []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}; !slices.Equal(got, want) {
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
	if _, err := SystemUpstreams(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "--dns-upstream") {
		t.Errorf("missing file: %v", err)
	}
}
