package dnsresolver

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"strings"
)

// SystemUpstreams reads the nameserver lines of a resolv.conf file. Zone
// indices are dropped; a file without nameservers is an error that says how
// to pass one.
func SystemUpstreams(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read DNS upstreams: %w (pass --dns-upstream ADDR[:PORT])", err)
	}
	defer f.Close()
	ups, err := parseResolvConf(bufio.NewScanner(f))
	if err != nil {
		return nil, fmt.Errorf("read DNS upstreams from %s: %w", path, err)
	}
	if len(ups) == 0 {
		return nil, fmt.Errorf("no nameserver in %s: pass --dns-upstream ADDR[:PORT]", path)
	}
	return ups, nil
}

func parseResolvConf(sc *bufio.Scanner) ([]string, error) {
	var ups []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(f[1])
		if err != nil {
			continue
		}
		ups = append(ups, netip.AddrPortFrom(a.WithZone(""), 53).String())
	}
	return ups, sc.Err()
}

// SearchDomains reads the search list of a resolv.conf file (the last
// "search" or "domain" line wins, as in glibc), normalised to lower case
// without the trailing dot. A missing file has none.
func SearchDomains(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseSearch(bufio.NewScanner(f))
}

func parseSearch(sc *bufio.Scanner) []string {
	var search []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || (f[0] != "search" && f[0] != "domain") {
			continue
		}
		search = search[:0:0]
		for _, d := range f[1:] {
			if d = strings.ToLower(strings.TrimSuffix(d, ".")); d != "" {
				search = append(search, d)
			}
		}
	}
	return search
}
