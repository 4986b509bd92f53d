// SPDX-License-Identifier: Apache-2.0

package sniprobe

import (
	"os"
	"sort"
	"strconv"
	"testing"
)

// TestMeasure compares a checked connection judged by sk_msg with the same
// connection unconfined, arms alternating: bulk throughput of one 512 MiB
// stream after an allowed ClientHello, and the time of a new connection
// (connect, ClientHello, the CDN's one-byte answer), and an upload of
// 512 MiB after the ClientHello (the direction sk_msg sees). It runs only when
// SNIPROBE_MEASURE gives the number of rounds.
func TestMeasure(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("SNIPROBE_MEASURE"))
	if rounds <= 0 {
		t.Skip("SNIPROBE_MEASURE=rounds runs the measurement")
	}
	conns := 300
	w := newWorld(t, 512<<20, Options{KeepInSockhash: os.Getenv("SNIPROBE_KEEP") != ""})
	arms := []struct {
		name string
		cg   string
	}{{"direct", w.cgOf}, {"sk_msg", w.cgOn}}
	bulk := make([][]float64, 2)
	up := make([][]float64, 2)
	lat := make([][]float64, 2)
	eagain := make([]int, 2)
	for r := 0; r < rounds; r++ {
		for i := range arms {
			a := (i + r) % 2
			b := w.child(arms[a].cg, "bulk", bulkName)
			if b.Err != "" || b.Bytes != 512<<20 {
				t.Fatalf("%s bulk: %+v", arms[a].name, b)
			}
			bulk[a] = append(bulk[a], float64(b.Bytes)/b.Seconds/1e6)
			eagain[a] += b.Eagain
			u := w.child(arms[a].cg, "upload", uploadName)
			if u.Err != "" {
				t.Fatalf("%s upload: %+v", arms[a].name, u)
			}
			up[a] = append(up[a], float64(u.Bytes)/u.Seconds/1e6)
			eagain[a] += u.Eagain
			l := w.child(arms[a].cg, "latency", "allowed.example", strconv.Itoa(conns))
			if l.Err != "" {
				t.Fatalf("%s latency: %+v", arms[a].name, l)
			}
			lat[a] = append(lat[a], l.Ns...)
		}
	}
	for a := range arms {
		t.Logf("%-7s bulk MB/s per round %v; EAGAIN from blocking reads: %d", arms[a].name, round(bulk[a]), eagain[a])
	}
	t.Logf("bulk median: direct %.0f MB/s, sk_msg %.0f MB/s, ratio %.2fx", q(bulk[0], .5), q(bulk[1], .5), q(bulk[1], .5)/q(bulk[0], .5))
	t.Logf("upload median: direct %.0f MB/s, sk_msg %.0f MB/s, ratio %.2fx", q(up[0], .5), q(up[1], .5), q(up[1], .5)/q(up[0], .5))
	t.Logf("new connection median: direct %.0f us, sk_msg %.0f us (+%.0f us)", q(lat[0], .5)/1e3, q(lat[1], .5)/1e3, (q(lat[1], .5)-q(lat[0], .5))/1e3)
	t.Logf("new connection p99:    direct %.0f us, sk_msg %.0f us (+%.0f us)", q(lat[0], .99)/1e3, q(lat[1], .99)/1e3, (q(lat[1], .99)-q(lat[0], .99))/1e3)
	for _, c := range []int{CounterMarked, CounterAllowed, CounterRefused, CounterEgressDrop, CounterUnhashed} {
		v, _ := w.probe.Counter(c)
		t.Logf("counter %d = %d", c, v)
	}
}

func q(xs []float64, p float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[int(p*float64(len(s)-1))]
}

func round(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}
