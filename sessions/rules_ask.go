// SPDX-License-Identifier: Apache-2.0

package sessions

// mayAsk checks an ask-mode request. A confined caller may not start one:
// an approval for the session would widen it past the policy of the
// session it was started from, and the person would not see that the
// question came from inside another session's bound. Ask and audit
// contradict each other (audit mode asks nothing, it allows everything).
func mayAsk(c Caller, ask, auditMode bool) error {
	if !ask {
		return nil
	}
	if auditMode {
		return failf(Invalid, "--ask and --audit do not go together: audit mode allows everything and asks nothing")
	}
	if c.Confined {
		return failf(Forbidden, "a confined process may not start an ask-mode session (an approval would widen it past the session it runs in): refused")
	}
	return nil
}
