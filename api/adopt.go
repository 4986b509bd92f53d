// SPDX-License-Identifier: Apache-2.0

package api

// AdoptRequest asks the daemon to put a process that is already running,
// and everything it starts from then on, into a session of its own with
// the machine allowlist (POST /v1/sessions/adopt): a CI runner's worker,
// whose later steps are then all confined. Only an unconfined root caller
// may ask. The answer is the new session's SessionInfo.
type AdoptRequest struct {
	// PID is the process to adopt, as the daemon's pid namespace numbers
	// it; it must be above 1, exist, be outside every sluice session and
	// be neither the daemon nor one of its ancestors.
	PID int `json:"pid"`
	// Name is an optional short label for the session's messages (at
	// most 64 printable characters); the session's name is sluice's.
	Name string `json:"name,omitempty"`
	// Audit starts the session in audit mode: nothing is denied, what
	// would be is reported.
	Audit bool `json:"audit,omitempty"`
}
