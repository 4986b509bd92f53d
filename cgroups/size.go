// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize parses a byte count as given to --memory-max: a decimal integer
// with an optional unit, or "max" for no limit, which it returns as -1 (the
// value SetMemoryMax takes for "max").
//
// Units are binary, as in the kernel's own memparse and in docker: K, M, G, T,
// P and E are powers of 1024, case-insensitive, optionally followed by "i",
// "iB" or "B" ("512M", "512m", "512MiB" and "512MB" are all 536870912).
// Fractions ("1.5G") are refused rather than rounded: say "1536M".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "max") {
		return -1, nil
	}
	digits := 0
	for digits < len(t) && '0' <= t[digits] && t[digits] <= '9' {
		digits++
	}
	if digits == 0 {
		return 0, fmt.Errorf("cgroups: size %q: want a whole number of bytes with an optional K, M, G, T, P or E suffix, or \"max\"", s)
	}
	n, err := strconv.ParseInt(t[:digits], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroups: size %q: %w", s, err)
	}
	mult, err := sizeMultiplier(t[digits:])
	if err != nil {
		return 0, fmt.Errorf("cgroups: size %q: %w", s, err)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("cgroups: size %q is too large", s)
	}
	return n * mult, nil
}

func sizeMultiplier(suffix string) (int64, error) {
	u := strings.ToUpper(suffix)
	if u == "" || u == "B" {
		return 1, nil
	}
	for _, tail := range []string{"IB", "I", "B"} {
		if len(u) == 1+len(tail) && strings.HasSuffix(u, tail) {
			u = u[:1]
			break
		}
	}
	if i := strings.Index("KMGTPE", u); len(u) == 1 && i >= 0 {
		return 1 << (10 * (i + 1)), nil
	}
	return 0, fmt.Errorf("unknown unit %q (want K, M, G, T, P or E)", suffix)
}
