// SPDX-License-Identifier: Apache-2.0

package sessions

import "testing"

func TestMayShareProcesses(t *testing.T) {
	free := Caller{UID: 1000, Creator: true}
	confined := Caller{UID: 1000, Creator: true, Confined: true, Own: &Parent{Name: "run-1"}}
	elsewhere := Caller{UID: 1000, Creator: true, Confined: true}
	for _, tc := range []struct {
		name    string
		c       Caller
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
