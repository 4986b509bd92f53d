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

// TestBucketRefills: full at first, empty after its burst, one token back
// per 1/Rate seconds and never more than the burst.
func TestBucketRefills(t *testing.T) {
	b := Bucket{Burst: 3, Rate: 2}
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if !b.Take(t0) {
			t.Fatalf("take %d of a full bucket of 3 refused", i+1)
		}
	}
	if b.Take(t0) {
		t.Fatal("a fourth take in the same instant allowed")
	}
	if !b.Take(t0.Add(500*time.Millisecond)) || b.Take(t0.Add(500*time.Millisecond)) {
		t.Error("half a second at 2/s: want exactly one token back")
	}
	later := t0.Add(time.Hour)
	n := 0
	for b.Take(later) {
		n++
	}
	if n != 3 {
		t.Errorf("after an hour %d tokens, want the burst 3", n)
	}
}
