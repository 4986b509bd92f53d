// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"errors"
	"fmt"
)

// Verify is an entry's "verify": how a connection to an address the
// session learned for the entry's names is judged beyond the address.
// Behind a CDN one address serves many names, chosen by the TLS SNI and
// the HTTP Host, so an allowed name's address alone lets every other name
// of the CDN through.
type Verify string

// The values of "verify".
const (
	// VerifyDefault (no "verify"): every TCP port is checked by name. On
	// ports 80 and 443 the first bytes must be a TLS ClientHello or an
	// HTTP/1 request carrying an allowed name; on the others a ClientHello
	// or a request is judged the same way, and anything else (SSH to a git
	// host, a database's protocol, a server that speaks first) passes.
	// UDP 443 (QUIC, whose name is encrypted) is refused so that clients
	// fall back to TCP.
	VerifyDefault Verify = ""
	// VerifyName checks every TCP port by name: the connection's first
	// bytes must be a TLS ClientHello with an allowed SNI or an HTTP/1
	// request with an allowed Host; QUIC is refused.
	VerifyName Verify = "name"
	// VerifyAddress judges the entry's addresses by address alone, every
	// port, QUIC included: the rule before names were checked, for names
	// whose address the user knows is theirs alone.
	VerifyAddress Verify = "address"
)

// ParseVerify reads a "verify" value.
func ParseVerify(s string) (Verify, error) {
	switch Verify(s) {
	case VerifyName, VerifyAddress:
		return Verify(s), nil
	}
	return "", fmt.Errorf(`"verify" must be "name" or "address", not %q`, s)
}

// checkVerify rejects "verify" on addresses: an IP or CIDR entry already
// names exactly the addresses it allows, and is always judged by address.
func checkVerify(t target, v Verify) error {
	switch v {
	case VerifyDefault:
		return nil
	case VerifyName, VerifyAddress:
		if t.kind == KindPrefix {
			return errors.New(`"verify" applies to host names only: an IP or CIDR entry is always judged by address`)
		}
		return nil
	}
	return fmt.Errorf(`"verify" must be "name" or "address", not %q`, string(v))
}

// ChecksTCP reports whether a TCP connection to port, on an address that
// is allowed only because it was learned for an entry with this rule, is
// judged by the name its first bytes carry: every port but for
// "address". A CDN routes TLS and HTTP by name on many ports (8443, 8080,
// 2053, ...). The datapath (bpf/verify.h, bpf/sni.h) holds the same rule
// for the kernel's connections, the proxy for its tunnels.
func (v Verify) ChecksTCP(port uint16) bool {
	return v != VerifyAddress
}

// Strict reports whether such a connection's first bytes must be a TLS
// ClientHello or an HTTP/1 request (ports 80 and 443, every port for
// "name"); where it is not, bytes that are neither pass unjudged.
func (v Verify) Strict(port uint16) bool {
	switch v {
	case VerifyName:
		return true
	case VerifyAddress:
		return false
	}
	return port == 80 || port == 443
}
