// SPDX-License-Identifier: Apache-2.0

package addrclass

import (
	"fmt"
	"net/netip"
	"strings"
)

// Refusal is an address an answer may not hold, and why (Classify's
// reason).
type Refusal struct {
	Addr netip.Addr
	Why  string
}

// RefusedError says that every address a name resolved to was refused by
// Rebinding. A resolver returns it when nothing usable is left, so that
// its client (the allowlist proxy) refuses the request with the reason
// instead of reporting a failed lookup.
type RefusedError struct {
	Name    string
	Refused []Refusal
}

// Error is the line a user reads.
func (e *RefusedError) Error() string {
	parts := make([]string, len(e.Refused))
	for i, r := range e.Refused {
		parts[i] = fmt.Sprintf("%v (%s)", r.Addr, r.Why)
	}
	return fmt.Sprintf("%s resolves only to addresses sluice refuses: %s (DNS rebinding protection; add allow_private to the entry if this is intended)",
		e.Name, strings.Join(parts, ", "))
}
