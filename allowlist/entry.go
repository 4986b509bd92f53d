// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind says what an entry matches.
type Kind int

// The kinds of entry. The zero Kind is invalid, so that an Entry left
// uninitialised is caught rather than read as a host.
const (
	// KindHost matches exactly one host name.
	KindHost Kind = iota + 1
	// KindWildcard matches every name strictly under a domain.
	KindWildcard
	// KindPrefix matches the addresses of an IP prefix; an IP literal is a
	// full-length prefix.
	KindPrefix
)

// String returns "host", "wildcard" or "prefix".
func (k Kind) String() string {
	switch k {
	case KindHost:
		return "host"
	case KindWildcard:
		return "wildcard"
	case KindPrefix:
		return "prefix"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Entry is one element of a policy, as returned by Policy methods and
// accepted by New.
type Entry struct {
	Kind Kind
	// Name is the normalized ASCII host name for KindHost and, for
	// KindWildcard, the domain under the wildcard without "*." (for
	// *.example.com, "example.com"). Empty for KindPrefix.
	Name string
	// Prefix is the masked prefix for KindPrefix, IPv4-mapped addresses
	// turned into IPv4. Invalid (zero) for the name kinds.
	Prefix netip.Prefix
	// AllowPrivate allows the resolver to learn private, loopback,
	// link-local and metadata addresses from DNS answers for the names this
	// entry matches. Only name entries may set it. In an entry returned by a
	// Policy it is true if any owner of the entry asked for it.
	AllowPrivate bool
	// Ports is the entry's port rule ("ports"); nil allows every port. In
	// an entry returned by a Policy it is the union of its owners' ports.
	Ports *Ports
	// Verify is how a connection to an address learned for this entry's
	// names is judged beyond its address ("verify" in the file): by the
	// name its first bytes carry, or by address alone. Only name entries
	// may set it. In an entry returned by a Policy it is the strictest any
	// owner asked for.
	Verify Verify
	// Owners lists who asked for the entry, first come first. Nil means the
	// entry was written without an owner (a plain string or an --allow flag).
	// The empty string inside a longer list stands for that unowned request
	// when owners asked for the same entry too, and keeps it alive when
	// those owners are removed with Policy.Without.
	Owners []string
}

// String returns the entry's canonical text, which ParseEntry reads back to
// the same target: "api.example.com", "*.example.com", "203.0.113.0/24",
// and a bare address such as "203.0.113.5" for a full-length prefix.
func (e Entry) String() string { return e.target().String() }

func (e Entry) target() target { return target{kind: e.Kind, name: e.Name, prefix: e.Prefix} }

// target is what an entry matches, without its options; it is comparable and
// serves as the key under which duplicate entries are merged.
type target struct {
	kind   Kind
	name   string
	prefix netip.Prefix
}

func (t target) String() string {
	switch t.kind {
	case KindHost:
		return t.name
	case KindWildcard:
		return "*." + t.name
	case KindPrefix:
		if t.prefix.IsValid() && t.prefix.IsSingleIP() {
			return t.prefix.Addr().String()
		}
		return t.prefix.String()
	}
	return fmt.Sprintf("invalid entry (kind %d)", int(t.kind))
}

// ParseEntry parses one entry as written in allowed_hosts or after --allow:
// a host name, a wildcard "*.domain", an IP address or a CIDR. The returned
// Entry has no owner and does not allow private addresses. The error names the
// entry and says what to write instead. ParseEntry never panics.
func ParseEntry(s string) (Entry, error) {
	t, err := parseTarget(s)
	if err != nil {
		return Entry{}, fmt.Errorf("invalid allowlist entry %q: %w", s, err)
	}
	return Entry{Kind: t.kind, Name: t.name, Prefix: t.prefix}, nil
}

// parseTarget does the work of ParseEntry. Its errors do not repeat the entry,
// because the callers wrap them in messages that already name it. The checks
// run from the most telling diagnosis to the least, so that a URL is reported
// as a URL rather than as a bad CIDR or port, and an IPv4 typo as an address
// rather than as a host name.
func parseTarget(s string) (target, error) {
	if s == "" {
		return target{}, errors.New("empty entry")
	}
	if !utf8.ValidString(s) {
		return target{}, errors.New("not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsSpace(r) {
			return target{}, errors.New("contains white space: give one host name, IP address or CIDR per entry, without spaces")
		}
		if unicode.IsControl(r) {
			return target{}, fmt.Errorf("contains the control character %U", r)
		}
	}
	if strings.Contains(s, "://") {
		return target{}, urlError(s)
	}
	if s[0] == '[' {
		return bracketTarget(s)
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return addrTarget(a)
	}
	if addr, bits, ok := strings.Cut(s, "/"); ok {
		if looksLikeIP(addr) {
			return prefixTarget(addr, bits)
		}
		return target{}, pathError(addr)
	}
	if n := strings.Count(s, ":"); n == 1 {
		host, _, _ := strings.Cut(s, ":")
		return target{}, portError(host)
	} else if n > 1 {
		_, err := netip.ParseAddr(s)
		return target{}, fmt.Errorf("invalid IPv6 address: %w", err)
	}
	if looksLikeIP(s) {
		_, err := netip.ParseAddr(s)
		return target{}, fmt.Errorf("invalid IPv4 address: %w", err)
	}
	if s == "*" {
		return target{}, errors.New(`a lone "*" would allow every host name: list the hosts, or use a wildcard such as *.example.com`)
	}
	if suffix, ok := strings.CutPrefix(s, "*."); ok {
		return wildcardTarget(suffix)
	}
	if strings.Contains(s, "*") {
		return target{}, errWildcardPlace
	}
	if rest, ok := strings.CutPrefix(s, "."); ok {
		if n, err := NormalizeName(rest); err == nil {
			return target{}, fmt.Errorf("a leading dot is not allowed: write *.%s for the names under %s, and %s for %s itself", n, n, n, n)
		}
	}
	n, err := NormalizeName(s)
	if err != nil {
		return target{}, err
	}
	return target{kind: KindHost, name: n}, nil
}

var errWildcardPlace = errors.New(`"*" is only allowed as the whole leftmost label, as in *.example.com`)

// wildcardTarget parses the part after "*.".
func wildcardTarget(suffix string) (target, error) {
	if strings.Contains(suffix, "*") {
		return target{}, errWildcardPlace
	}
	if suffix == "" || suffix == "." {
		return target{}, errors.New(`nothing after "*.": a wildcard needs a domain, as in *.example.com`)
	}
	n, err := NormalizeName(suffix)
	if err != nil {
		return target{}, fmt.Errorf("invalid wildcard domain: %w", err)
	}
	// One label after "*." would allow a whole top-level domain.
	if labelCount(n) < 2 {
		return target{}, fmt.Errorf("*.%s is too broad: a wildcard needs at least two labels after \"*.\", as in *.example.%s", n, n)
	}
	return target{kind: KindWildcard, name: n}, nil
}

// bracketTarget accepts "[2001:db8::1]" as the address inside: it is how
// IPv6 literals appear in URLs and host:port strings, so users paste it, and
// the meaning is unambiguous.
func bracketTarget(s string) (target, error) {
	inner, rest, ok := strings.Cut(s[1:], "]")
	if !ok {
		return target{}, errors.New(`missing "]" after a bracketed IPv6 address`)
	}
	a, err := netip.ParseAddr(inner)
	if err != nil {
		return target{}, fmt.Errorf("invalid address in brackets: %w", err)
	}
	switch {
	case rest == "":
		return addrTarget(a)
	case rest[0] == ':':
		return target{}, portError(inner)
	case rest[0] == '/':
		return target{}, fmt.Errorf("write a CIDR without brackets, as in %s%s", inner, rest)
	}
	return target{}, errors.New(`unexpected text after "]"`)
}

// looksLikeIP reports text that can only have been meant as an address:
// digits and dots (IPv4), or anything with a colon (IPv6), so that it gets an
// address error rather than a confusing host-name one.
func looksLikeIP(s string) bool {
	if base, _, _ := strings.Cut(s, "%"); strings.Contains(base, ":") {
		return strings.Trim(base, "0123456789abcdefABCDEF:.") == ""
	}
	return strings.Contains(s, ".") && strings.ContainsAny(s, "0123456789") && strings.Trim(s, "0123456789.") == ""
}

// urlError explains that an entry is a host, not a URL: the policy works at the
// network layer, where there is no scheme or path to check, so accepting a URL
// would silently allow more than it says.
func urlError(s string) error {
	if u, err := url.Parse(s); err == nil {
		if h := u.Hostname(); h != "" && !strings.Contains(h, "://") {
			if t, err := parseTarget(h); err == nil {
				return fmt.Errorf("give the host name %q, not a URL: the allowlist works on hosts and addresses, not on URLs", t.String())
			}
		}
	}
	return errors.New("looks like a URL: give only the host name, such as api.example.com")
}

// pathError explains that an entry with a path is not a host.
func pathError(host string) error {
	if strings.Count(host, ":") == 1 {
		host, _, _ = strings.Cut(host, ":")
	}
	if t, err := parseTarget(host); err == nil && t.kind != KindPrefix {
		return fmt.Errorf("give the host name %q without a path: the allowlist works on hosts and addresses, not on URLs", t.String())
	}
	return errors.New("a '/' is only allowed in a CIDR such as 203.0.113.0/24: give only the host name")
}

// portError explains that a port is not part of the entry's text: ports
// are the entry object's "ports" (an entry without them allows every port).
func portError(host string) error {
	if t, err := parseTarget(host); err == nil {
		return fmt.Errorf(`a port is not part of the host: give %q, and for one port only the object {"host": %q, "ports": [PORT]} in network_allowlist.json`, t.String(), t.String())
	}
	return errors.New(`a ':' is only allowed in an IPv6 address; ports go in the entry object's "ports"`)
}
