// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"os"
	"testing"
)

// The socket is the session group's (0660) when it exists, root's alone
// (0600) when it does not; a configured mode wins, with the group kept.
func TestSocketPerm(t *testing.T) {
	for _, c := range []struct {
		configured os.FileMode
		gid        uint32
		has        bool
		mode       os.FileMode
		wantGID    uint32
	}{
		{0, 1001, true, 0o660, 1001},
		{0, 1001, false, 0o600, 0},
		{0, 0, false, 0o600, 0},
		{0o666, 1001, true, 0o666, 1001},
		{0o640, 0, false, 0o640, 0},
	} {
		mode, gid := socketPerm(c.configured, c.gid, c.has)
		if mode != c.mode || gid != c.wantGID {
			t.Errorf("socketPerm(%#o, %d, %v) = %#o, %d; want %#o, %d", c.configured, c.gid, c.has, mode, gid, c.mode, c.wantGID)
		}
	}
}

func TestCheckSocketMode(t *testing.T) {
	for _, m := range []os.FileMode{0o600, 0o660, 0o666, 0o620} {
		if err := CheckSocketMode(m); err != nil {
			t.Errorf("CheckSocketMode(%#o) = %v", m, err)
		}
	}
	for _, m := range []os.FileMode{0o777, 0o4660, 0o1666, 0o060, 0o400} {
		if err := CheckSocketMode(m); err == nil {
			t.Errorf("CheckSocketMode(%#o) accepted", m)
		}
	}
}
