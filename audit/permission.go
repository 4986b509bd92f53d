// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"fmt"

	"github.com/sluice-dev/sluice/prompts"
)

// FromPrompt is the audit event of an ask-mode prompt's event: host is
// the name (or the address) asked about; an address is also in dst.
func FromPrompt(ev prompts.Event) Event {
	p := ev.Prompt
	e := Event{Session: p.Session, Host: p.Name, Prompt: p.ID, Comm: p.AskedBy, Reason: ev.Reason}
	if p.Kind == prompts.KindAddr {
		e.Dst = p.Name
	}
	what := p.Name
	switch ev.Kind {
	case prompts.Asked:
		e.Type = PermissionAsked
		e.Message = fmt.Sprintf("asking: %s wants %s (sluice approve %s [--once|--session|--always], sluice deny %s)", p.AskedBy, what, p.ID, p.ID)
	case prompts.Granted:
		e.Type, e.Scope, e.AnsweredBy = PermissionGranted, string(ev.Answer.Scope), ev.Answer.By
		e.Message = fmt.Sprintf("allowed %s (%s) by %s", what, ev.Answer.Scope, ev.Answer.By)
	case prompts.TimedOut:
		e.Type, e.AnsweredBy = PermissionTimeout, "timeout"
		e.Message = fmt.Sprintf("denied %s: nobody answered within %v", what, p.Expires.Sub(p.Asked).Round(1e9))
	default:
		e.Type, e.AnsweredBy = PermissionDenied, ev.Answer.By
		switch {
		case ev.Reason != "" && ev.Answer.By == "":
			e.Message = fmt.Sprintf("denied %s without asking: %s", what, ev.Reason)
		case ev.Reason != "":
			e.Message = fmt.Sprintf("denied %s: %s", what, ev.Reason)
		default:
			e.Message = fmt.Sprintf("denied %s by %s", what, ev.Answer.By)
		}
	}
	return e
}
