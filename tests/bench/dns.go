// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The DNS benchmark's load generator writes and reads DNS messages by hand
// rather than through miekg/dns: a client that allocates and parses per
// query would take CPU from the resolver it measures, on a machine with
// few cores, and blur the ratio towards 1.

// dnsBudget bounds the DNS part: rounds stop early rather than overrun.
const dnsBudget = 75 * time.Second

// dnsOptions are the DNS part's flags.
type dnsOptions struct {
	rounds     int
	dur        time.Duration // measured time per arm, after dnsWarmup
	workers    int           // closed loop: sockets, one query in flight each
	senders    int           // open loop: sockets, fed in turn by one pacer
	cpuprofile string
}

// addDNSFlags registers the DNS part's flags; on is -dns.
//
// The defaults suit a 2-CPU machine, where generator, resolver and stub
// share the CPUs: 64 queries in flight (dnsperf's default is 100) are what
// it takes for the direct arm to reach its peak, where fewer leave CPU
// idle between wake-ups; 8 open-loop sockets keep any one reader from
// falling behind at half that peak; 3 rounds of 10 arms of 1.75 s each fit
// dnsBudget with room for settling between arms.
func addDNSFlags(fs *flag.FlagSet, on *bool, d *dnsOptions) {
	fs.BoolVar(on, "dns", true, "run the DNS benchmark (sluice's resolver against the same upstream asked directly; about a minute)")
	fs.IntVar(&d.rounds, "dns-rounds", 3, "A/B rounds of the DNS benchmark")
	fs.DurationVar(&d.dur, "dns-time", 1500*time.Millisecond, "measured time per arm of the DNS benchmark, after 0.25 s of warm-up")
	fs.IntVar(&d.workers, "dns-workers", 64, "DNS closed-loop sockets, one query in flight each")
	fs.IntVar(&d.senders, "dns-senders", 8, "DNS open-loop (latency) sockets, fed in turn by one pacer")
	fs.StringVar(&d.cpuprofile, "dns-cpuprofile", "", "write a CPU profile of the DNS benchmark (the resolver runs in-process) to `file`")
}

// validate checks the DNS part's flags.
func (d dnsOptions) validate() error {
	if d.rounds < 1 || d.rounds > 20 || d.dur <= 0 || d.dur > 5*time.Second || d.workers < 1 || d.workers > 256 || d.senders < 1 || d.senders > 64 {
		return errors.New("want 1 ≤ -dns-rounds ≤ 20, 0 < -dns-time ≤ 5s, 1 ≤ -dns-workers ≤ 256 and 1 ≤ -dns-senders ≤ 64")
	}
	return nil
}

// dnsQueryTimeout is when a query counts as lost. Loopback loses nothing
// unless a socket buffer overflows, or a resolver falls behind.
const dnsQueryTimeout = time.Second

// dnsZone is the zone the benchmark asks names in; the sluice arm's policy
// allows *.dnsZone.
const dnsZone = "bench.test"

// uniqueLabelLen is the length of the random first label of a unique name:
// 16 hex digits, 64 random bits, so no name repeats within a run and no
// answer can come from sluice's cache.
const uniqueLabelLen = 16

// appendQuery appends a DNS query for name (dotted, without the trailing
// dot) of type A, class IN, recursion desired, without EDNS0 (as glibc asks
// by default), with the given ID.
func appendQuery(b []byte, id uint16, name string) []byte {
	b = binary.BigEndian.AppendUint16(b, id)
	b = append(b, 0x01, 0x00) // flags: RD
	b = append(b, 0, 1, 0, 0, 0, 0, 0, 0)
	for len(name) > 0 {
		label := name
		if i := strings.IndexByte(name, '.'); i >= 0 {
			label, name = name[:i], name[i+1:]
		} else {
			name = ""
		}
		b = append(b, byte(len(label)))
		b = append(b, label...)
	}
	b = append(b, 0)
	return append(b, 0, 1, 0, 1) // QTYPE A, QCLASS IN
}

// setQueryID overwrites a query's ID in place.
func setQueryID(q []byte, id uint16) { binary.BigEndian.PutUint16(q, id) }

// setUniqueLabel writes v as the 16 hex digits of the first label of a
// query built by appendQuery for a name whose first label is
// uniqueLabelLen long.
func setUniqueLabel(q []byte, v uint64) {
	const hex = "0123456789abcdef"
	l := q[13 : 13+uniqueLabelLen] // after the 12-byte header and the length byte
	for i := range l {
		l[len(l)-1-i] = hex[v&0xf]
		v >>= 4
	}
}

// replyStatus is what the load generator makes of a datagram.
type replyStatus int

const (
	replyOther  replyStatus = iota // not the reply to the query in flight: a late one, or junk
	replyGood                      // NOERROR with at least one answer
	replyFailed                    // the reply, but an error or an empty answer
)

// checkReply classifies the datagram b, expected to answer the query with
// ID id.
func checkReply(b []byte, id uint16) replyStatus {
	if len(b) < 12 || binary.BigEndian.Uint16(b) != id || b[2]&0x80 == 0 {
		return replyOther
	}
	rcode := b[3] & 0x0f
	if rcode != 0 || binary.BigEndian.Uint16(b[6:]) == 0 {
		return replyFailed
	}
	return replyGood
}

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted,
// an ascending slice; 0 for an empty one.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// stubAddr is the address the stub upstream answers for name: a
// documentation address (203.0.113.0/24, TEST-NET-3, never contacted), one
// of 254 spread by a hash of the name, so that learning sees many
// addresses rather than one address with every name attached.
func stubAddr(name string) [4]byte {
	h := uint32(2166136261) // FNV-1a
	for i := range len(name) {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		h = (h ^ uint32(c)) * 16777619
	}
	return [4]byte{203, 0, 113, byte(1 + h%254)}
}

// inZone reports whether the fully qualified name is under dnsZone.
func inZone(name string) bool {
	const suffix = "." + dnsZone + "."
	return len(name) > len(suffix) && strings.EqualFold(name[len(name)-len(suffix):], suffix)
}

// fmtQPS shows a rate in queries per second.
func fmtQPS(q float64) string {
	switch {
	case q >= 1e6:
		return fmt.Sprintf("%.2fM qps", q/1e6)
	case q >= 1e4:
		return fmt.Sprintf("%.1fk qps", q/1e3)
	default:
		return fmt.Sprintf("%.0f qps", q)
	}
}

// qpsRow compares rates (higher is better) by the median ratio B/A against
// a minimum.
func qpsRow(name string, s *series, minRatio float64) tableRow {
	r := s.ratios()
	ok := median(r) >= minRatio
	return tableRow{
		bench:  name,
		a:      fmtQPS(median(s.a)),
		b:      fmtQPS(median(s.b)),
		cmp:    fmt.Sprintf("%.3f (%.3f–%.3f)", median(r), slices.Min(r), slices.Max(r)),
		target: fmt.Sprintf("≥ %.2f", minRatio),
		result: verdict(ok),
	}
}

// addedInfoRow is addedRow without a target.
func addedInfoRow(name string, s *series) tableRow {
	d := s.added()
	return tableRow{
		bench:  name,
		a:      fmtNS(median(s.a)),
		b:      fmtNS(median(s.b)),
		cmp:    fmt.Sprintf("%s added (%s–%s)", signedNS(median(d)), signedNS(slices.Min(d)), signedNS(slices.Max(d))),
		target: "—", result: "report only",
	}
}

func signedNS(ns float64) string {
	if ns >= 0 {
		return "+" + fmtNS(ns)
	}
	return fmtNS(ns)
}

// latencyRow is addedRow for a percentile that may have reached
// dnsQueryTimeout, where lost queries count: an arm that lost that many
// was overloaded, and its figure is a floor, not a latency. A maxAdded of
// 0 makes a row without a target.
func latencyRow(name string, s *series, maxAdded time.Duration) tableRow {
	var row tableRow
	if maxAdded > 0 {
		row = addedRow(name, s, maxAdded)
	} else {
		row = addedInfoRow(name, s)
	}
	overA, overB := median(s.a) >= float64(dnsQueryTimeout), median(s.b) >= float64(dnsQueryTimeout)
	lost := "≥ " + fmtNS(float64(dnsQueryTimeout)) + " (lost queries)"
	if overA {
		row.a = lost
	}
	if overB {
		row.b = lost
	}
	switch {
	case overB:
		row.cmp = "B overloaded: it lost queries"
		if maxAdded > 0 {
			row.result = verdict(false)
		}
	case overA:
		row.cmp = "A overloaded: it lost queries"
		if maxAdded > 0 {
			row.result = "**inconclusive**"
		}
	}
	return row
}
