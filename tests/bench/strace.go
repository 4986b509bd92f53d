// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"cmp"
	"io"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// syscallCost is the time strace saw spent in one kind of system call.
type syscallCost struct {
	what  string // syscall name, for bpf(2) with its command and object name
	calls int
	total time.Duration
}

// waits are system calls whose time is spent waiting for another thread or
// process (the Go scheduler, the confined command), not doing sluice's own
// work: counting them would count the same interval several times over.
var waits = map[string]bool{
	"futex": true, "nanosleep": true, "clock_nanosleep": true,
	"epoll_wait": true, "epoll_pwait": true, "epoll_pwait2": true,
	"wait4": true, "waitid": true, "ppoll": true, "pselect6": true,
	"rt_sigsuspend": true, "sched_yield": true,
}

var (
	// 1234 bpf(BPF_PROG_LOAD, {...}, 168) = 26 <0.164527>
	// 1234 bpf(BPF_PROG_LOAD, {...} <unfinished ...>
	// 1234 <... bpf resumed>) = 26 <0.164527>
	straceLine    = regexp.MustCompile(`^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()(.*)$`)
	straceElapsed = regexp.MustCompile(`<(\d+\.\d+)>\s*$`)
	bpfCommand    = regexp.MustCompile(`^(BPF_\w+)`)
	bpfObjectName = regexp.MustCompile(`(?:prog_name|map_name)="([^"]*)"`)
)

// parseStrace reads the output of `strace -f -T` and returns the time spent
// per kind of call, waits excluded, most expensive first.
func parseStrace(r io.Reader) ([]syscallCost, error) {
	pending := map[string]string{} // pid -> label of its unfinished call
	costs := map[string]*syscallCost{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		m := straceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue // signals, exits, "+++" lines
		}
		pid, rest := m[1], m[4]
		var label string
		if m[2] != "" { // resumed
			label = pending[pid]
			delete(pending, pid)
			if label == "" {
				label = m[2]
			}
		} else {
			label = m[3]
			if label == "bpf" {
				label = bpfLabel(rest)
			}
		}
		e := straceElapsed.FindStringSubmatch(rest)
		if e == nil {
			pending[pid] = label // unfinished: its time comes with "resumed"
			continue
		}
		if waits[m[2]+m[3]] {
			continue
		}
		secs, err := strconv.ParseFloat(e[1], 64)
		if err != nil {
			continue
		}
		c := costs[label]
		if c == nil {
			c = &syscallCost{what: label}
			costs[label] = c
		}
		c.calls++
		c.total += time.Duration(secs * float64(time.Second))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]syscallCost, 0, len(costs))
	for _, c := range costs {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b syscallCost) int { return cmp.Compare(b.total, a.total) })
	return out, nil
}

// bpfLabel names a bpf(2) call by its command, and by the program or map it
// creates, since those are where the kernel's verifier spends its time.
func bpfLabel(args string) string {
	label := "bpf"
	if m := bpfCommand.FindStringSubmatch(args); m != nil {
		label += " " + m[1]
	}
	if m := bpfObjectName.FindStringSubmatch(args); m != nil {
		label += " " + m[1]
	}
	return label
}
