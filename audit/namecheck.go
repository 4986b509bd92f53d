// SPDX-License-Identifier: Apache-2.0

package audit

import "github.com/sluice-dev/sluice/namecheck"

// FromNameCheck is the audit event of a session verifier's refusal: Dst
// and Port the address the program connected to, Host the name its first
// bytes carried (empty: none), Proto "TLS SNI", "HTTP Host" or "no host
// name"; the reason names the names the address was learned for.
func FromNameCheck(session string, r namecheck.Refusal) Event {
	e := Event{Type: NameRefused, Session: session, PID: r.PID, Comm: r.Comm, Dst: r.Dst.Addr().String(),
		Port: r.Dst.Port(), Proto: string(r.Flight.Proto), Host: r.Flight.Name, Reason: r.Reason,
		Message: r.String()}
	if r.Audit {
		e.Type = NameAudit
	}
	return e
}
