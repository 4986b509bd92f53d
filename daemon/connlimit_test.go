// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"strings"
	"testing"
)

func TestConnLimits(t *testing.T) {
	l := newConnLimits(2, 3)
	for _, uid := range []uint32{1000, 1000, 1001} {
		if err := l.acquire(uid); err != nil {
			t.Fatalf("uid %d within the limits: %v", uid, err)
		}
	}
	if err := l.acquire(1000); err == nil || !strings.Contains(err.Error(), "uid 1000 already has 2 connections") {
		t.Errorf("a third connection of uid 1000: %v", err)
	}
	if err := l.acquire(1002); err == nil || !strings.Contains(err.Error(), "3 connections open from non-root users") {
		t.Errorf("over the total: %v", err)
	}
	for range 5 {
		if err := l.acquire(0); err != nil {
			t.Errorf("root is not counted: %v", err)
		}
	}
	l.release(1000)
	if err := l.acquire(1002); err != nil {
		t.Errorf("after a release: %v", err)
	}
	// A release that was never acquired changes nothing.
	l.release(4242)
	l.release(0)
	if err := l.acquire(1003); err == nil {
		t.Errorf("a stray release freed a slot")
	}
	var none *connLimits
	if err := none.acquire(1000); err != nil {
		t.Errorf("no limits: %v", err)
	}
	none.release(1000)
}
