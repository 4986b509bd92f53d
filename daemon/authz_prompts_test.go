// SPDX-License-Identifier: Apache-2.0

package daemon

import "testing"

func TestMayAnswer(t *testing.T) {
	mine := sessionRef{name: "run-1", uid: 1000}
	for _, tc := range []struct {
		name   string
		c      caller
		always bool
		ok     bool
	}{
		{"the session's user", caller{uid: 1000}, false, true},
		{"root", caller{uid: 0}, false, true},
		{"another user", caller{uid: 1001}, false, false},
		{"a process inside the session", caller{uid: 1000, confined: true, session: "run-1"}, false, false},
		{"a process inside another session", caller{uid: 1000, confined: true, session: "run-2"}, false, false},
		{"root inside a session", caller{uid: 0, confined: true, session: "run-2"}, false, false},
		{"always by an ordinary user", caller{uid: 1000}, true, false},
		{"always by an admin", caller{uid: 1000, admin: true}, true, true},
		{"always by root", caller{uid: 0}, true, true},
	} {
		if err := tc.c.mayAnswer(mine, tc.always); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
