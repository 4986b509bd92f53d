// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestRandomPrefixes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ps := randomPrefixes(r, 1000)
	if len(ps) != 1000 {
		t.Fatalf("got %d prefixes, want 1000", len(ps))
	}
	ten := netip.MustParsePrefix("10.0.0.0/8")
	fd := netip.MustParsePrefix("fd00::/8")
	seen := map[netip.Prefix]bool{}
	for i, p := range ps {
		if seen[p] {
			t.Fatalf("duplicate %v", p)
		}
		seen[p] = true
		outer := ten
		if i >= 500 {
			outer = fd
		}
		if !outer.Contains(p.Addr()) || p.Bits() < outer.Bits() || p != p.Masked() {
			t.Fatalf("prefix %d = %v, want a masked prefix inside %v", i, p, outer)
		}
	}
	for _, v4 := range []bool{true, false} {
		for _, a := range targets(r, ps, v4, 64) {
			if a.Is4() != v4 {
				t.Fatalf("target %v has the wrong family", a)
			}
			in := false
			for _, p := range ps {
				in = in || p.Contains(a)
			}
			if !in {
				t.Fatalf("target %v is in no prefix", a)
			}
		}
	}
}

func TestRoundsWithin(t *testing.T) {
	n, err := roundsWithin(5, time.Now().Add(time.Hour), func(int) error { return nil })
	if n != 5 || err != nil {
		t.Errorf("ample time: ran %d rounds (%v), want 5", n, err)
	}
	n, err = roundsWithin(5, time.Now().Add(-time.Second), func(int) error { return nil })
	if n != 1 || err != nil {
		t.Errorf("no time: ran %d rounds (%v), want 1", n, err)
	}
	n, err = roundsWithin(5, time.Now().Add(time.Hour), func(r int) error {
		if r == 2 {
			return errors.New("boom")
		}
		return nil
	})
	if n != 2 || err == nil {
		t.Errorf("failing round: ran %d rounds (%v), want 2 and an error", n, err)
	}
}
