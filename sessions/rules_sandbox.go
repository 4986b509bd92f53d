// SPDX-License-Identifier: Apache-2.0

package sessions

// mayShareProcesses is the rule for share_processes, which turns a
// session's process isolation off: a confined caller may not ask for it.
// The new session's command is the daemon's child, outside the caller's
// Landlock domain, so it would reach the user's processes that the
// caller's own session keeps out of reach.
func mayShareProcesses(c Caller, requested bool) error {
	if requested && c.Confined {
		return failf(Forbidden, "share_processes: a confined caller may not turn process isolation off")
	}
	return nil
}

// mayAllowUserNamespaces is the rule for allow_userns: a confined caller may not
// ask for it, since its own session refuses it user namespaces and the
// new session would be a way round that.
func mayAllowUserNamespaces(c Caller, requested bool) error {
	if requested && c.Confined {
		return failf(Forbidden, "allow_userns: a confined caller may not allow user namespaces")
	}
	return nil
}
