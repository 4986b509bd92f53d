// SPDX-License-Identifier: Apache-2.0

package daemon

import "net/http"

// mayAdopt says why c may not put a running process into a session
// (POST /v1/sessions/adopt), or nil. Only root: the process may be anyone's,
// and moving another user's process between cgroups is root's power, not
// the session or admin group's. And never from inside a session: a
// confined root process that could adopt could also pick what it adopts
// (its own unconfined helpers included) and the session they get.
func (c caller) mayAdopt() error {
	if c.uid != 0 {
		return fail(http.StatusForbidden, "uid %d may not adopt a process into a session: only root may", c.uid)
	}
	if c.confined {
		return fail(http.StatusForbidden, "a process inside a sluice session may not adopt processes into sessions: refused")
	}
	return nil
}
