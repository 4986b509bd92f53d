// SPDX-License-Identifier: Apache-2.0

package daemon

import "testing"

func TestMayShareProcesses(t *testing.T) {
	free := caller{uid: 1000, creator: true}
	confined := caller{uid: 1000, creator: true, confined: true, session: "run-1"}
	elsewhere := caller{uid: 1000, creator: true, confined: true}
	for _, tc := range []struct {
		name    string
		c       caller
		request bool
		ok      bool
	}{
		{"unconfined caller", free, true, true},
		{"confined caller", confined, true, false},
		{"caller confined outside this daemon", elsewhere, true, false},
		{"confined caller, isolated session", confined, false, true},
	} {
		if err := mayShareProcesses(tc.c, tc.request); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err := mayAllowUserNamespaces(tc.c, tc.request); (err == nil) != tc.ok {
			t.Errorf("allow_userns, %s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
