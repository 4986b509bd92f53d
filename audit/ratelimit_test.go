// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := NewLimiter()
	now := time.Unix(1000, 0)
	written, reported := 0, 0
	// A flood of 5,000 events in one instant: the burst passes.
	for range 5000 {
		if ok, r := l.Allow(now); ok {
			written++
			reported += r
		}
	}
	if written != eventBurst {
		t.Fatalf("%d of a 5000-event flood written, want the burst %d", written, eventBurst)
	}
	// Two seconds later the bucket has refilled by 2*eventRate; the first
	// event written reports the suppressed ones.
	now = now.Add(2 * time.Second)
	ok, r := l.Allow(now)
	if !ok || r != 5000-eventBurst {
		t.Fatalf("after the flood: allowed %v, reported %d, want %d", ok, r, 5000-eventBurst)
	}
	// A steady flood at 1,000 a second for 3 seconds: about eventRate a
	// second get through, and reports come at most once a second.
	written, reported = 0, 0
	reports := 0
	for i := range 3000 {
		if ok, r := l.Allow(now.Add(time.Duration(i) * time.Millisecond)); ok {
			written++
			if r > 0 {
				reports++
				reported += r
			}
		}
	}
	if written < 2*eventRate || written > 2*eventRate+3*eventRate {
		t.Errorf("steady flood: %d written in 3 s, want about %d a second after the bucket's rest", written, eventRate)
	}
	if reports > 3 {
		t.Errorf("%d suppression reports in 3 s, want at most one a second", reports)
	}
	if total := written + reported + l.Flush(); total != 3000 {
		t.Errorf("written %d + reported %d + flushed = %d, want every one of 3000 accounted for", written, reported, total)
	}
}
