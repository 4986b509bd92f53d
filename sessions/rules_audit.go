// SPDX-License-Identifier: Apache-2.0

package sessions

// mayAudit is the rule for audit-mode sessions, which deny nothing: a
// confined caller may start one only from inside an audit-mode session
// (which denies nothing already). Otherwise an agent confined in a
// blocking session could ask the daemon for an audit session and reach
// any host from it: an audit session is wider than every policy.
func mayAudit(c Caller, ownAudit, requested bool) error {
	if requested && c.Confined && !ownAudit {
		return failf(Forbidden, "a confined process may not start an audit-mode session (it would deny nothing): refused")
	}
	return nil
}
