// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// series holds one benchmark's samples, one A/B pair per round, in
// nanoseconds (per operation, or per command for wall times).
type series struct {
	a, b []float64
}

func (s *series) add(a, b float64) {
	s.a = append(s.a, a)
	s.b = append(s.b, b)
}

// ratios are the per-round B/A.
func (s *series) ratios() []float64 {
	out := make([]float64, len(s.a))
	for i := range s.a {
		out[i] = s.b[i] / s.a[i]
	}
	return out
}

// added are the per-round B-A.
func (s *series) added() []float64 {
	out := make([]float64, len(s.a))
	for i := range s.a {
		out[i] = s.b[i] - s.a[i]
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// fmtNS shows a duration given in nanoseconds with three significant
// digits or so, in the unit that suits it.
func fmtNS(ns float64) string {
	switch abs := max(ns, -ns); {
	case abs < 1e3:
		return fmt.Sprintf("%.0f ns", ns)
	case abs < 1e6:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	case abs < 1e9:
		return fmt.Sprintf("%.1f ms", ns/1e6)
	default:
		return time.Duration(ns).Round(time.Millisecond).String()
	}
}

// tableRow is one line of the results table, already formatted.
type tableRow struct {
	bench, a, b, cmp, target, result string
}

// ratioRow compares by the median ratio B/A against a maximum (0: none).
func ratioRow(name string, s *series, maxRatio float64) tableRow {
	r := s.ratios()
	row := tableRow{
		bench:  name,
		a:      fmtNS(median(s.a)),
		b:      fmtNS(median(s.b)),
		cmp:    fmt.Sprintf("%.3f (%.3f–%.3f)", median(r), slices.Min(r), slices.Max(r)),
		target: "—", result: "report only",
	}
	if maxRatio > 0 {
		row.target = fmt.Sprintf("≤ %.2f", maxRatio)
		row.result = verdict(median(r) <= maxRatio)
	}
	return row
}

// addedRow compares by the median added time B-A against a maximum.
func addedRow(name string, s *series, maxAdded time.Duration) tableRow {
	d := s.added()
	return tableRow{
		bench:  name,
		a:      fmtNS(median(s.a)),
		b:      fmtNS(median(s.b)),
		cmp:    fmt.Sprintf("+%s added (+%s–+%s)", fmtNS(median(d)), fmtNS(slices.Min(d)), fmtNS(slices.Max(d))),
		target: "< +" + fmtNS(float64(maxAdded)),
		result: verdict(median(d) < float64(maxAdded)),
	}
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "**missed**"
}

// writeTable writes rows as a markdown table.
func writeTable(w io.Writer, rows []tableRow) {
	fmt.Fprintln(w, "| benchmark | A: unconfined | B: confined | B vs A: median (min–max) | target | result |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | --- |")
	for _, r := range rows {
		cells := []string{r.bench, r.a, r.b, r.cmp, r.target, r.result}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// roundsWithin calls round for r = 0, 1, ... rounds-1, but stops early,
// after at least one round, when another round as slow as the slowest so
// far would end after until. It returns how many rounds ran. This is what
// keeps the whole benchmark inside its time budget on a busy machine,
// where every round takes longer: fewer rounds, rather than no result.
func roundsWithin(rounds int, until time.Time, round func(r int) error) (int, error) {
	var slowest time.Duration
	for r := range rounds {
		if r > 0 && time.Now().Add(slowest).After(until) {
			return r, nil
		}
		start := time.Now()
		if err := round(r); err != nil {
			return r, err
		}
		slowest = max(slowest, time.Since(start))
	}
	return rounds, nil
}
