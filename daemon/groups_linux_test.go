// SPDX-License-Identifier: Apache-2.0

package daemon

import "testing"

// TestGroupRules checks who counts as admin and who may create sessions,
// from the peer credentials the socket gave: root, the primary group, a
// supplementary group; and an unset group (lookup failed or not
// configured) counts for no one, not even for gid 0.
func TestGroupRules(t *testing.T) {
	const admGID, sessGID = 50, 60
	configured := &Server{adminGID: admGID, hasAdmGID: true, sessionGID: sessGID, hasSessionGID: true}
	unset := &Server{}
	for _, tc := range []struct {
		name             string
		s                *Server
		p                peer
		admin, mayCreate bool
	}{
		{"root", unset, peer{UID: 0, GID: 0}, true, true},
		{"admin by primary group", configured, peer{UID: 1000, GID: admGID}, true, false},
		{"admin by supplementary group", configured, peer{UID: 1000, GID: 1000, Groups: []uint32{7, admGID}}, true, false},
		{"session group member", configured, peer{UID: 1000, GID: 1000, Groups: []uint32{sessGID}}, false, true},
		{"both groups", configured, peer{UID: 1000, GID: sessGID, Groups: []uint32{admGID}}, true, true},
		{"in neither", configured, peer{UID: 1000, GID: 1000, Groups: []uint32{7, 8}}, false, false},
		{"gid 0 with no admin group configured", unset, peer{UID: 1000, GID: 0, Groups: []uint32{0}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.isAdmin(tc.p); got != tc.admin {
				t.Errorf("isAdmin = %v, want %v", got, tc.admin)
			}
			if got := tc.s.mayCreate(tc.p); got != tc.mayCreate {
				t.Errorf("mayCreate = %v, want %v", got, tc.mayCreate)
			}
		})
	}
}
