// SPDX-License-Identifier: Apache-2.0

//go:build linux

package dnse2e

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestHTTPHeadJudgedInKernel: the request heads an attacker writes to
// port 80 of an address allowed for cdn.test, shared by a CDN with
// evil.test, which routes by Host. The kernel judges the first request
// head on the client's own socket (bpf/sni.c, judge_http). Each evasion
// has its unconfined twin (the CDN, Go's HTTP server, delivers
// evil.test that way) where one exists; confined, the CDN records no
// request for evil.test, the refusal is explained, and the client's send
// is refused at once: no case hangs. The honest forms (a port, a final
// dot, several writes, a body) are allowed.
func TestHTTPHeadJudgedInKernel(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4)
	allow := []string{"--allow", "cdn.test"}
	raw := func(head string, chunk string) []string {
		return []string{"http-raw", "cdn.test", "4", "80", base64.StdEncoding.EncodeToString([]byte(head)), chunk}
	}
	twin := func(head string) []string {
		return []string{"http-raw", cdnV4.String(), "4", "80", base64.StdEncoding.EncodeToString([]byte(head)), "0"}
	}
	refused := []struct {
		name, head, chunk, line string
		twin                    bool // the CDN delivers evil.test this way without sluice
	}{
		{"upper case", "GET / HTTP/1.1\r\nHOST: EVIL.TEST\r\nConnection: close\r\n\r\n", "0", "(HTTP Host evil.test): the address was allowed for cdn.test", true},
		{"a port", "GET / HTTP/1.1\r\nHost: evil.test:80\r\nConnection: close\r\n\r\n", "0", "(HTTP Host evil.test)", true},
		{"one byte per write", "GET / HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n", "1", "(HTTP Host evil.test)", true},
		{"split in the name", "GET / HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n", "21", "(HTTP Host evil.test)", true},
		// Go's server, as many, takes a lone LF for a line's end.
		{"lone LF", "GET / HTTP/1.1\nHost: evil.test\nConnection: close\n\n", "0", "not a request head the kernel's check reads", true},
		{"lone LF inside", "GET / HTTP/1.1\r\nX-A: b\nHost: evil.test\r\nConnection: close\r\n\r\n", "0", "not a request head the kernel's check reads", true},
		// An absolute-form target wins over Host at Go's server.
		{"absolute form", "GET http://evil.test/ HTTP/1.1\r\nHost: cdn.test\r\nConnection: close\r\n\r\n", "0", "not a request head the kernel's check reads", true},
		{"two Host headers", "GET / HTTP/1.1\r\nHost: cdn.test\r\nHost: evil.test\r\nConnection: close\r\n\r\n", "0", "more than one Host header", false},
		{"space before the colon", "GET / HTTP/1.1\r\nHost : evil.test\r\nConnection: close\r\n\r\n", "0", "not a request head the kernel's check reads", false},
		{"folded", "GET / HTTP/1.1\r\nHost: cdn.test\r\n evil.test\r\nConnection: close\r\n\r\n", "0", "not a request head the kernel's check reads", false},
		{"no Host", "GET / HTTP/1.0\r\n\r\n", "0", "the request names no host", false},
		{"an IPv6 literal", "GET / HTTP/1.1\r\nHost: [2001:db8::1]\r\nConnection: close\r\n\r\n", "0", "not a request head the kernel's check reads", false},
		{"not HTTP", "SSH-2.0-OpenSSH_9.6\r\n", "0", "(no host name): the first bytes are neither a TLS ClientHello nor an HTTP/1 request", false},
		{"a head too long", "GET / HTTP/1.1\r\nX-Pad: " + strings.Repeat("a", 4200) + "\r\nHost: cdn.test\r\nConnection: close\r\n\r\n", "0", "not a request head the kernel's check reads", false},
	}
	for _, c := range refused {
		if !c.twin {
			continue
		}
		cdn = f.w.ServeCDNReset(cdn)
		if r := f.unconfined(t, twin(c.head)...); !r.OK || !sawHost(cdn.Hosts(), "evil.test") {
			t.Fatalf("%s, unconfined: %s; the CDN recorded %q, want evil.test", c.name, r, cdn.Hosts())
		}
	}
	cdn = f.w.ServeCDNReset(cdn)
	for _, c := range refused {
		f.kernelRefuses(t, c.name, allow, c.line, raw(c.head, c.chunk)...)
	}
	if cdn.Saw("evil.test") || len(cdn.Hosts()) != 0 {
		t.Fatalf("the CDN received requests: %q", cdn.Hosts())
	}
	for _, c := range []struct{ name, head, chunk string }{
		{"plain", "GET / HTTP/1.1\r\nHost: cdn.test\r\nConnection: close\r\n\r\n", "0"},
		{"a port and a final dot", "GET / HTTP/1.1\r\nhost:  cdn.test.:80 \r\nConnection: close\r\n\r\n", "0"},
		{"one byte per write", "GET / HTTP/1.1\r\nHost: cdn.test\r\nConnection: close\r\n\r\n", "1"},
		{"a body in the same write", "POST /x HTTP/1.1\r\nHost: cdn.test\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello", "0"},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: cdn.test\r\nConnection: close\r\n\r\n", "0"},
	} {
		r, stderr := f.probe(t, allow, raw(c.head, c.chunk)...)
		if !r.OK || !strings.Contains(r.Reply, "HTTP/1.1 ") {
			t.Errorf("%s: %s\n%s", c.name, r, stderr)
		}
	}
	if !sawHost(cdn.Hosts(), "cdn.test") {
		t.Errorf("the CDN never saw cdn.test: %q", cdn.Hosts())
	}
}

// kernelRefuses runs the probe's action in a session with flags and
// checks that the kernel's name check refused its send, at once (EACCES
// within 8 s), with a line that contains line.
func (f *fixture) kernelRefuses(t *testing.T, name string, flags []string, line string, action ...string) {
	t.Helper()
	start := time.Now()
	r, stderr := f.probe(t, flags, action...)
	if r.OK {
		t.Errorf("%s: went through: %s", name, r)
	}
	if !strings.Contains(stderr, "refused probe[") || !strings.Contains(stderr, line) {
		t.Errorf("%s: no explained refusal (%q) in:\n%s", name, line, stderr)
	}
	if r.Errno != "EACCES" {
		t.Errorf("%s: the client got %s, want its send refused (EACCES)", name, r)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("%s: took %v", name, d)
	}
}

// sawHost reports whether one of the Hosts a CDN recorded names name,
// without regard to case, a port or a final dot.
func sawHost(hosts []string, name string) bool {
	for _, h := range hosts {
		if i := strings.LastIndexByte(h, ':'); i >= 0 {
			h = h[:i]
		}
		if strings.EqualFold(strings.TrimSuffix(h, "."), name) {
			return true
		}
	}
	return false
}

// TestNameCheckInAuditMode: in audit mode the kernel's name check lets a
// connection with another name through, and says what it would have
// refused, on both ports.
func TestNameCheckInAuditMode(t *testing.T) {
	f := newFixture(t)
	cdn := f.w.ServeCDN(t, cdnV4)
	flags := []string{"--audit", "--allow", "cdn.test"}
	for _, c := range []struct {
		action []string
		line   string
	}{
		{[]string{"tls-name", "cdn.test", "4", "443", "evil.test"}, "audit: would refuse probe["},
		{[]string{"http-name", "cdn.test", "4", "80", "evil.test"}, "audit: would refuse probe["},
	} {
		cdn = f.w.ServeCDNReset(cdn)
		r, stderr := f.probe(t, flags, c.action...)
		if !r.OK || !cdn.Saw("evil.test") {
			t.Errorf("%s in audit mode: %s, the CDN saw %q %q; want it through", c.action[0], r, cdn.SNIs(), cdn.Hosts())
		}
		if !strings.Contains(stderr, c.line) || !strings.Contains(stderr, "evil.test): the address was allowed for cdn.test") {
			t.Errorf("%s in audit mode: no line saying what would have been refused in:\n%s", c.action[0], stderr)
		}
	}
}
