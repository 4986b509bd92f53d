// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/allowlist"
)

// target is a destination as a client named it.
type target struct {
	host string     // as requested; IPv6 without brackets
	addr netip.Addr // valid when host is an IP literal
	port uint16
}

func (t target) String() string { return hostPort(t.host, t.port) }

// hostPort joins host and port, bracketing IPv6 addresses.
func hostPort(host string, port uint16) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// newTarget classifies host as an IP literal or a name. Names are checked
// later, by the policy (NormalizeName), so that an odd name is a refusal the
// user can read rather than a parse error.
func newTarget(host string, port uint16) (target, error) {
	if host == "" {
		return target{}, errors.New("empty host")
	}
	if port == 0 {
		return target{}, errors.New("port 0 is not a destination port")
	}
	t := target{host: host, port: port}
	if strings.IndexByte(host, ':') >= 0 {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return target{}, fmt.Errorf("%q is neither a host name nor an IPv6 address", host)
		}
		if a.Zone() != "" {
			return target{}, fmt.Errorf("%q has an IPv6 zone: zones name local interfaces, not destinations", host)
		}
		t.addr = a
		return t, nil
	}
	// netip.ParseAddr accepts only the four-decimal-octets form of IPv4.
	// Other spellings that a C resolver reads as addresses ("127.1",
	// "0x7f.1", "010.0.0.1") fail here and are refused by NormalizeName,
	// whose names may not end in a numeric label: they never reach a
	// resolver that could interpret them.
	if a, err := netip.ParseAddr(host); err == nil {
		t.addr = a
	}
	return t, nil
}

// parseAuthority parses an HTTP authority, host[:port] or [v6][:port]. A
// missing port is defaultPort, or an error when defaultPort is 0 (CONNECT).
// Userinfo is refused, not stripped: "allowed.example@evil.example" is a
// classic way of making two parsers disagree about the destination.
func parseAuthority(s string, defaultPort uint16) (target, error) {
	if s == "" {
		return target{}, errors.New("empty authority")
	}
	if strings.IndexByte(s, '@') >= 0 {
		return target{}, fmt.Errorf("authority %q has userinfo ('@'): not accepted, it hides the real destination", s)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f || strings.IndexByte(`/\?#%"<>^{|}`+"`", c) >= 0 {
			return target{}, fmt.Errorf("authority %q contains %q: want host:port", s, c)
		}
	}
	host, portStr := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return target{}, fmt.Errorf("authority %q: missing ']'", s)
		}
		host = s[1:end]
		rest := s[end+1:]
		switch {
		case rest == "":
		case rest[0] == ':':
			portStr = rest[1:]
			if portStr == "" {
				return target{}, fmt.Errorf("authority %q: empty port", s)
			}
		default:
			return target{}, fmt.Errorf("authority %q: unexpected %q after ']'", s, rest)
		}
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() {
			return target{}, fmt.Errorf("authority %q: %q in brackets is not an IPv6 address", s, host)
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, portStr = s[:i], s[i+1:]
		if strings.IndexByte(host, ':') >= 0 {
			return target{}, fmt.Errorf("authority %q: IPv6 addresses must be in brackets", s)
		}
		if portStr == "" {
			return target{}, fmt.Errorf("authority %q: empty port", s)
		}
	}
	port := defaultPort
	if portStr != "" {
		p, err := parsePort(portStr)
		if err != nil {
			return target{}, fmt.Errorf("authority %q: %w", s, err)
		}
		port = p
	}
	if port == 0 {
		return target{}, fmt.Errorf("authority %q has no port: want host:port", s)
	}
	if host == "" {
		return target{}, fmt.Errorf("authority %q has no host", s)
	}
	return newTarget(host, port)
}

// parsePort accepts 1 to 5 decimal digits with a value of 1 to 65535: no
// sign, no hex, no spaces (strconv.Atoi alone would take "+80").
func parsePort(s string) (uint16, error) {
	if len(s) == 0 || len(s) > 5 {
		return 0, fmt.Errorf("invalid port %q", s)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("invalid port %q", s)
		}
		n = n*10 + int(s[i]-'0')
	}
	if n == 0 || n > 65535 {
		return 0, fmt.Errorf("port %q out of range 1-65535", s)
	}
	return uint16(n), nil
}

// sameAuthority reports whether a Host header value names the target t. The
// port may be left out of the header: some clients send "Host: name" with
// CONNECT name:443, and defaultPort says which port that means for the
// absolute form (80 for http). Names compare after normalization.
func sameAuthority(hostHeader string, t target, defaultPort uint16) bool {
	dp := defaultPort
	if dp == 0 {
		dp = t.port // CONNECT: a header without a port names the host only
	}
	h, err := parseAuthority(hostHeader, dp)
	if err != nil || h.port != t.port {
		return false
	}
	if h.addr.IsValid() || t.addr.IsValid() {
		return h.addr == t.addr
	}
	a, errA := allowlist.NormalizeName(h.host)
	b, errB := allowlist.NormalizeName(t.host)
	if errA != nil || errB != nil {
		return strings.EqualFold(h.host, t.host)
	}
	return a == b
}
