// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"os"
)

// Who may open the API socket. Every request is authorised again from the
// caller's credentials (authz.go), but a socket anyone can open lets
// anyone hold connections, read the status and the machine allowlist, and
// reach the daemon's parsers: the file's mode narrows that to the callers
// that may use the daemon at all, root and the session group. So the
// socket is root:GROUP 0660 when the session group exists, and 0600
// (root only, who may then create sessions alone) when it does not.
// Config.SocketMode overrides the mode, e.g. 0666 for callers that are
// neither (an admin group member outside the session group, or a
// container caller whose uid is in no group of the host's).

// socketPerm is the mode and group of the API socket: the configured
// mode, or the rule above; the group is the session group's gid, or 0.
func socketPerm(configured os.FileMode, gid uint32, hasGroup bool) (os.FileMode, uint32) {
	if !hasGroup {
		gid = 0
	}
	switch {
	case configured != 0:
		return configured, gid
	case hasGroup:
		return 0o660, gid
	}
	return 0o600, gid
}

// CheckSocketMode says why mode cannot be the API socket's, or nil: only
// read and write bits mean anything on a socket (connect needs write), and
// setuid, setgid, sticky or execute bits are refused as a typo.
func CheckSocketMode(mode os.FileMode) error {
	if mode&^0o666 != 0 {
		return fmt.Errorf("socket mode %#o: only read and write bits (at most 0666)", uint32(mode))
	}
	if mode&0o200 == 0 {
		return fmt.Errorf("socket mode %#o: the owner (root) must be able to connect (0600 at least)", uint32(mode))
	}
	return nil
}
