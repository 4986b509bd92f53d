// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"errors"
	"testing"
)

func TestMayAsk(t *testing.T) {
	free := Caller{UID: 1000, Creator: true}
	confined := Caller{UID: 1000, Creator: true, Confined: true, Own: &Parent{Name: "run-1"}}
	for _, tc := range []struct {
		name       string
		c          Caller
		ask, audit bool
		kind       Kind
	}{
		{"unconfined caller asks", free, true, false, 0},
		{"no ask", confined, false, false, 0},
		{"confined caller asks", confined, true, false, Forbidden},
		{"ask with audit", free, true, true, Invalid},
	} {
		err := mayAsk(tc.c, tc.ask, tc.audit)
		var e *Error
		switch {
		case tc.kind == 0 && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.kind != 0 && (!errors.As(err, &e) || e.Kind != tc.kind):
			t.Errorf("%s: %v, want kind %v", tc.name, err, tc.kind)
		}
	}
}
