// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/enforcer"
)

// workerBench is one benchmark run by the worker in both arms.
type workerBench struct {
	name     string
	args     []string
	newNet   bool                // run in a fresh, empty network namespace
	prepare  func(pid int) error // configures the worker's fresh namespace (newNet)
	maxRatio float64             // 0: report only
	judged   int                 // connects the LPM must allow per run, checked in the session's counters
	control  bool                // both arms unconfined: shows the noise floor of a ratio
	s        series
}

// measureWorkers runs the worker benchmarks, all of them in each round,
// for up to o.rounds rounds or until the time until, and returns them with
// the number of rounds run. The confined arm is sess, which must hold the
// CIDR set prefixes; the unconfined arm is free.
func measureWorkers(ctx context.Context, o options, until time.Time, worker string, sess *enforcer.Session, free *freeCgroup, rng *rand.Rand, prefixes []netip.Prefix) ([]*workerBench, int, error) {
	// Iteration counts that take about 0.2 s per run on an idle machine:
	// long enough to average over scheduling noise, short enough for
	// many alternating rounds.
	iters := func(base int) int { return max(1, int(float64(base)*o.scale)) }
	args := func(op string, n, warmup int, extra ...string) []string {
		a := []string{"-op", op, "-n", strconv.Itoa(n), "-warmup", strconv.Itoa(warmup), "-chunks", strconv.Itoa(min(20, n))}
		return append(a, extra...)
	}
	tcpN, udpN, judgedN, cycleN, sockoptN := iters(10_000), iters(60_000), iters(30_000), iters(10_000), iters(100_000)
	const judgedWarmup = 2000
	addrs4 := joinAddrs(targets(rng, prefixes, true, 64))
	addrs6 := joinAddrs(targets(rng, prefixes, false, 64))
	benches := []*workerBench{
		{name: "TCP connect+close, loopback", args: args("tcp", tcpN, 1000), maxRatio: 1.05},
		{name: "control: TCP connect+close, both arms unconfined (noise floor)", args: args("tcp", tcpN, 1000), control: true},
		{name: "UDP sendto, loopback", args: args("udp", udpN, 5000), maxRatio: 1.10},
		{name: "judged IPv4 connect (LPM hit, then ENETUNREACH)", args: args("connect", judgedN, judgedWarmup, "-addrs", addrs4),
			newNet: true, judged: judgedN + judgedWarmup},
		{name: "judged IPv6 connect (LPM hit, then EADDRNOTAVAIL)", args: args("connect", judgedN, judgedWarmup, "-addrs", addrs6),
			newNet: true, judged: judgedN + judgedWarmup},
		// What the setsockopt hook adds to every option a program sets,
		// even one it never refuses.
		{name: "setsockopt TCP_NODELAY (never refused)", args: args("sockopt", sockoptN, 5000)},
		// A program's real cycle: what a client does per connection to
		// an allowed remote host, through the LPM and the setsockopt hook.
		{name: "TCP cycle to an allowed remote address (socket, SO_LINGER, TCP_NODELAY, connect, close; LPM hit)",
			args: args("cycle", cycleN, 1000, "-addrs", cycleAddr.String()), newNet: true, prepare: prepareCycleNetns,
			maxRatio: 1.05, judged: cycleN + 1000},
	}
	if o.workers != nil {
		benches = slices.DeleteFunc(benches, func(b *workerBench) bool { return !o.workers.MatchString(b.name) })
	}
	rounds, err := roundsWithin(o.rounds, until, func(r int) error {
		fmt.Fprintf(os.Stderr, "bench: worker benchmarks, round %d/%d\n", r+1, o.rounds)
		for _, b := range benches {
			start := func(s starter) (float64, error) { return runWorker(ctx, s, worker, b.newNet, b.prepare, b.args...) }
			unconfined := func() (float64, error) { return start(free.sess) }
			confined := func() (float64, error) {
				before, err := sess.Counters()
				if err != nil {
					return 0, err
				}
				ns, err := start(confinedArm{sess})
				if err != nil || b.judged == 0 {
					return ns, err
				}
				// Proof that the confined connects took the LPM path rather
				// than, say, a loopback shortcut: each one counts as allowed.
				after, err := sess.Counters()
				if err != nil {
					return 0, err
				}
				if got := after.Allowed - before.Allowed; got < uint64(b.judged) {
					return 0, fmt.Errorf("%s: the session allowed %d connects, want %d: the LPM path was not taken", b.name, got, b.judged)
				}
				return ns, nil
			}
			if b.control {
				confined = unconfined
			}
			a, bb, err := pair(r, unconfined, confined)
			if err != nil {
				return err
			}
			b.s.add(a, bb)
		}
		return nil
	})
	return benches, rounds, err
}
