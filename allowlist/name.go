// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// DNS limits on the text form of a name without its trailing dot (RFC 1035
// section 2.3.4: 255 octets on the wire is 253 characters of text).
const (
	maxNameLen  = 253
	maxLabelLen = 63
)

// idnaProfile converts Unicode labels to A-labels and checks A-labels found in
// ASCII names. idna.Lookup is the RFC 5891 section 5 lookup profile with UTS
// #46 mapping (case folding, full-width forms, ideographic full stops),
// STD3 character rules, hyphen and joiner checks and the Bidi rule, and it is
// non-transitional (ß stays ß), as current browsers and resolvers are: the
// name we match is the name that will be resolved.
var idnaProfile = idna.Lookup

// NormalizeName returns the canonical form of a host name: ASCII, lower case,
// without a trailing dot, with Unicode labels converted to punycode A-labels.
// It fails unless the result is a valid DNS host name (see the package
// documentation for the exact rules). Entries and queried names go through
// this same function, so that they compare byte for byte.
//
// A resolver that matches a name read from the wire should forward the
// normalized name it matched, not the original bytes, so that what is allowed
// and what is resolved can never differ.
func NormalizeName(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty host name")
	}
	s := name
	if !isASCII(s) {
		if !utf8.ValidString(s) {
			return "", errors.New("host name is not valid UTF-8")
		}
		var err error
		if s, err = labelsToASCII(s); err != nil {
			return "", err
		}
	}
	s = strings.TrimSuffix(lowerASCII(s), ".")
	if err := checkName(s); err != nil {
		return "", err
	}
	return s, nil
}

// labelsToASCII converts only the non-ASCII labels through IDNA. The
// ASCII labels are left to checkName, which is deliberately more lenient
// than STD3: it allows '_' (SRV and ACME names such as _acme.example.com) and
// "--" in the third and fourth positions (CDN names such as
// r3---sn-abc.example.com), both of which resolve in practice.
func labelsToASCII(s string) (string, error) {
	labels := strings.Split(s, ".")
	for i, l := range labels {
		if isASCII(l) {
			continue
		}
		a, err := idnaProfile.ToASCII(l)
		if err != nil {
			return "", fmt.Errorf("label %q is not a valid internationalised (IDNA) label: %w", l, err)
		}
		// A label may map to several (U+3002 IDEOGRAPHIC FULL STOP becomes
		// '.'), which checkName then sees as separate labels.
		labels[i] = a
	}
	return strings.Join(labels, "."), nil
}

// checkName validates an ASCII, lower-case name without its trailing dot.
func checkName(s string) error {
	if s == "" {
		return errors.New("empty host name")
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("host name is %d characters long; DNS allows at most %d", len(s), maxNameLen)
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return err
		}
	}
	// A name whose last label is a number is read as an IPv4 address by
	// inet_aton-style parsers ("127.1", "0x7f000001"): refusing it keeps a
	// name entry from ever meaning an address, and no top-level domain is
	// numeric (RFC 3696 section 2).
	if last := labels[len(labels)-1]; isNumericLabel(last) {
		return fmt.Errorf("the last label %q is numeric: a host name cannot end like an IP address", last)
	}
	return nil
}

func checkLabel(l string) error {
	if l == "" {
		return errors.New("empty label: the name has a leading dot or two dots in a row")
	}
	if len(l) > maxLabelLen {
		return fmt.Errorf("label %q is %d characters long; DNS allows at most %d", l, len(l), maxLabelLen)
	}
	for i := 0; i < len(l); i++ {
		if c := l[i]; !isLabelByte(c) {
			return fmt.Errorf("invalid character %q in %q: host names may contain only letters, digits, '-' and '_'", rune(c), l)
		}
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return fmt.Errorf("label %q starts or ends with '-'", l)
	}
	if strings.HasPrefix(l, "xn--") {
		// An A-label must decode to a valid U-label, otherwise two spellings
		// could stand for one name, or a typo could hide in punycode.
		u, err := idnaProfile.ToUnicode(l)
		if err != nil {
			return fmt.Errorf("label %q is not valid punycode: %w", l, err)
		}
		if u == "" {
			return fmt.Errorf("label %q is not valid punycode: nothing after \"xn--\"", l)
		}
	}
	return nil
}

func isLabelByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// isNumericLabel reports labels that inet_aton accepts as a number: decimal
// or octal digits, or 0x followed by hex digits.
func isNumericLabel(l string) bool {
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		return strings.Trim(rest, "0123456789abcdef") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// lowerASCII folds only ASCII letters: Unicode case folding is IDNA's job,
// and strings.ToLower would apply different (locale-free but non-UTS-46) rules.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// labelCount counts the labels of a normalized name.
func labelCount(name string) int { return strings.Count(name, ".") + 1 }

// under reports whether name lies strictly below domain (both normalized).
func under(name, domain string) bool {
	return len(name) > len(domain)+1 && strings.HasSuffix(name, domain) && name[len(name)-len(domain)-1] == '.'
}

// IsLoopbackName reports whether name is "localhost" or lies under it
// (RFC 6761 section 6.3). Such names must resolve to loopback only; the
// policy does not treat them specially, but a resolver should answer them
// itself rather than forward them.
func IsLoopbackName(name string) bool {
	n, err := NormalizeName(name)
	if err != nil {
		return false
	}
	return n == "localhost" || under(n, "localhost")
}
