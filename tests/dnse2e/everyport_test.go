// SPDX-License-Identifier: Apache-2.0

//go:build linux

package dnse2e

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// TestNamesOnEveryPort (issue 30): a CDN routes TLS and HTTP by name on
// ports other than 80 and 443 too (8443, 8080 here), so an address
// allowed for cdn.test reached evil.test on them. The kernel now judges
// the first flight on every TCP port of a learned address: a ClientHello
// by its SNI, an HTTP/1 head (any method, empty lines before it) by its
// Host, and anything else passes (a client-first line protocol, a server
// that speaks first). Each attack has its unconfined twin; judged by what
// the CDN recorded. "verify": "address" opts an entry out, "verify":
// "name" refuses the other protocols.
func TestNamesOnEveryPort(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4, cdnV6)
	allow := []string{"--allow", "cdn.test"}
	tlsPort, httpPort := fmt.Sprint(world.CDNAltTLSPort), fmt.Sprint(world.CDNAltHTTPPort)
	raw := func(target, fam, head string) []string {
		return []string{"http-raw", target, fam, httpPort, base64.StdEncoding.EncodeToString([]byte(head)), "0"}
	}
	const leading = "\r\nGET / HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n"
	const method = "PROPFIND / HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n"
	attacks := []struct {
		name          string
		confined, twn []string
		line          string
	}{
		{"TLS on 8443", []string{"tls-name", "cdn.test", "4", tlsPort, "evil.test"}, []string{"tls-name", cdnV4.String(), "4", tlsPort, "evil.test"},
			fmt.Sprintf("-> %s:%s (TLS SNI evil.test): the address was allowed for cdn.test", cdnV4, tlsPort)},
		{"TLS on 8443, IPv6", []string{"tls-name", "cdn.test", "6", tlsPort, "evil.test"}, []string{"tls-name", cdnV6.String(), "6", tlsPort, "evil.test"},
			"(TLS SNI evil.test): the address was allowed for cdn.test"},
		{"HTTP on 8080", []string{"http-name", "cdn.test", "4", httpPort, "evil.test"}, []string{"http-name", cdnV4.String(), "4", httpPort, "evil.test"},
			"(HTTP Host evil.test): the address was allowed for cdn.test"},
		{"HTTP after empty lines", raw("cdn.test", "4", leading), raw(cdnV4.String(), "4", leading),
			"(HTTP Host evil.test): the address was allowed for cdn.test"},
		{"HTTP with another method", raw("cdn.test", "4", method), raw(cdnV4.String(), "4", method),
			"(HTTP Host evil.test): the address was allowed for cdn.test"},
	}
	for _, a := range attacks {
		cdn = f.w.ServeCDNReset(cdn)
		if r := f.unconfined(t, a.twn...); !r.OK || !cdn.Saw("evil.test") {
			t.Fatalf("%s, unconfined: %s; the CDN recorded %q %q, want evil.test", a.name, r, cdn.SNIs(), cdn.Hosts())
		}
	}
	cdn = f.w.ServeCDNReset(cdn)
	for _, a := range attacks {
		f.kernelRefuses(t, a.name, allow, a.line, a.confined...)
	}
	if cdn.Saw("evil.test") {
		t.Fatalf("the CDN received evil.test: %q %q", cdn.SNIs(), cdn.Hosts())
	}

	// The honest name on the same ports, and the other protocols.
	for _, c := range []struct {
		name   string
		action []string
		reply  string
	}{
		{"TLS cdn.test on 8443", []string{"tls-name", "cdn.test", "4", tlsPort, "cdn.test"}, "200"},
		{"HTTP cdn.test on 8080", []string{"http-name", "cdn.test", "4", httpPort, "cdn.test"}, "200"},
		{"HTTP cdn.test after an empty line", raw("cdn.test", "4", "\r\nGET / HTTP/1.1\r\nHost: cdn.test\r\nConnection: close\r\n\r\n"), "200"},
		{"a client-first line protocol", []string{"send-name", "cdn.test", "4", fmt.Sprint(world.LinePort), "PING"}, "ok"},
		{"SMTP-like command", []string{"send-name", "cdn.test", "4", fmt.Sprint(world.LinePort), "EHLO client.test"}, "ok"},
		{"a server that speaks first", []string{"banner-reply", "cdn.test", "4", fmt.Sprint(world.BannerPort), "SSH-2.0-probe"}, "ok"},
	} {
		r, stderr := f.probe(t, allow, c.action...)
		if !r.OK || !strings.Contains(r.Reply, c.reply) {
			t.Errorf("%s: %s\n%s", c.name, r, stderr)
		}
	}
	if lines := cdn.Lines(); !slices.Contains(lines, "PING") || !slices.Contains(lines, "EHLO client.test") || !slices.Contains(lines, "SSH-2.0-probe") {
		t.Errorf("the line services recorded %q", lines)
	}
	if !slices.Contains(cdn.SNIs(), "cdn.test") || !sawHost(cdn.Hosts(), "cdn.test") {
		t.Errorf("the CDN never saw cdn.test: %q %q", cdn.SNIs(), cdn.Hosts())
	}

	// "verify": "name": the other protocols are refused on every port,
	// and nothing reaches the server.
	cdn = f.w.ServeCDNReset(cdn)
	p := writePolicy(t, `{"allowed_hosts": [{"host": "cdn.test", "verify": "name"}]}`)
	r, stderr := f.probe(t, []string{"--allowlist", p}, "banner-reply", "cdn.test", "4", fmt.Sprint(world.BannerPort), "SSH-2.0-probe")
	if r.OK || !strings.Contains(stderr, "(no host name): the first bytes are neither a TLS ClientHello nor an HTTP/1 request") {
		t.Errorf(`"verify": "name", a server that speaks first: %s\n%s`, r, stderr)
	}
	// "verify": "address": by address on every port.
	p = writePolicy(t, `{"allowed_hosts": [{"host": "cdn.test", "verify": "address"}]}`)
	if r, stderr := f.probe(t, []string{"--allowlist", p}, "tls-name", "cdn.test", "4", tlsPort, "evil.test"); !r.OK || !cdn.Saw("evil.test") {
		t.Errorf(`"verify": "address": %s; the CDN recorded %q\n%s`, r, cdn.SNIs(), stderr)
	}
	time.Sleep(100 * time.Millisecond)
	if lines := cdn.Lines(); len(lines) != 0 {
		t.Errorf(`"verify": "name": the server read %q`, lines)
	}
}
