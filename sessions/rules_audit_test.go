// SPDX-License-Identifier: Apache-2.0

package sessions

import "testing"

func TestMayAudit(t *testing.T) {
	free := Caller{UID: 1000, Creator: true}
	confined := Caller{UID: 1000, Creator: true, Confined: true, Own: &Parent{Name: "run-1"}}
	for _, tc := range []struct {
		name              string
		c                 Caller
		ownAudit, request bool
		ok                bool
	}{
		{"unconfined caller asks for audit", free, false, true, true},
		{"confined caller in a blocking session asks for audit", confined, false, true, false},
		{"confined caller in an audit session asks for audit", confined, true, true, true},
		{"confined caller asks for a blocking session", confined, false, false, true},
	} {
		if err := mayAudit(tc.c, tc.ownAudit, tc.request); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
