// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"net/http"
	"testing"
)

// Only unconfined root adopts running processes: not the admin or session
// group, and not root inside a session.
func TestMayAdopt(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    caller
		want int // 0: allowed
	}{
		{"root", caller{uid: 0, admin: true, creator: true}, 0},
		{"admin group", caller{uid: 1000, admin: true, creator: true}, http.StatusForbidden},
		{"session group", caller{uid: 1000, creator: true}, http.StatusForbidden},
		{"confined root", caller{uid: 0, admin: true, creator: true, confined: true, session: "run-1-abc"}, http.StatusForbidden},
		{"root confined elsewhere", caller{uid: 0, confined: true}, http.StatusForbidden},
	} {
		err := tc.c.mayAdopt()
		got := 0
		if he, ok := err.(*httpError); ok {
			got = he.code
		} else if err != nil {
			t.Errorf("%s: %v is not an API error", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: mayAdopt = %v, want status %d", tc.name, err, tc.want)
		}
	}
}
