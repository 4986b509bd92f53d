// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// maxRunAdded is the target for what `sluice run` adds to a command's wall
// time, sandbox included (issue 9).
const maxRunAdded = 60 * time.Millisecond

// runTrue is the outcome of the `sluice run -- true` benchmark.
type runTrue struct {
	wall      series        // A: bare true, B: sluice run -- true, ns
	cold      time.Duration // the first run on a fresh instance
	user, sys []float64     // CPU time of the sluice process (and its reaped children), ns
}

// runCommand runs cmd and returns its wall time, from just before fork to
// just after it was reaped, which is what a user waits.
func runCommand(cmd *exec.Cmd) (time.Duration, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s: %w%s", strings.Join(cmd.Args, " "), err, quoteOutput(stderr.String()))
	}
	return d, nil
}

// sluiceRunTrue builds `sluice run --user 65534:65534 -- true`, for the
// instance named in the environment.
func sluiceRunTrue(ctx context.Context, sluice string, prefix ...string) *exec.Cmd {
	argv := append(slices.Clone(prefix), sluice, "run", "--user", "65534:65534", "--", "true")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// Interrupted, sluice is asked to end its session itself, as on ^C;
	// WaitDelay kills it if it does not.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// benchRunTrue measures `sluice run -- true` against `true` run directly as
// the same user. With cold, the instance must not exist yet: the first run,
// which creates it, is then reported apart.
// It runs up to rounds rounds, fewer if they would end after until.
func benchRunTrue(ctx context.Context, sluice string, rounds int, until time.Time, cold bool, label string) (*runTrue, error) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		return nil, fmt.Errorf("find true: %w", err)
	}
	bare := func() (time.Duration, error) {
		cmd := exec.CommandContext(ctx, truePath)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody.UID, Gid: nobody.GID, Groups: []uint32{}}}
		return runCommand(cmd)
	}
	rt := &runTrue{}
	confined := func() (time.Duration, error) {
		cmd := sluiceRunTrue(ctx, sluice)
		cmd.Dir = "/"
		d, err := runCommand(cmd)
		if err == nil {
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			rt.user = append(rt.user, float64(time.Duration(ru.Utime.Nano())))
			rt.sys = append(rt.sys, float64(time.Duration(ru.Stime.Nano())))
		}
		return d, err
	}

	if cold {
		if rt.cold, err = confined(); err != nil {
			return nil, err
		}
		rt.user, rt.sys = nil, nil
	}
	_, err = roundsWithin(rounds, until, func(r int) error {
		fmt.Fprintf(os.Stderr, "bench: sluice run -- true%s, round %d/%d\n", label, r+1, rounds)
		a, b, err := pair(r, bare, confined)
		if err != nil {
			return err
		}
		rt.wall.add(float64(a), float64(b))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rt, nil
}

// pair runs one round's A and B, in the order A B on even rounds and B A on
// odd ones, so that neither arm always runs first (warmer or colder caches,
// a CPU frequency ramp).
func pair[T any](round int, a, b func() (T, error)) (T, T, error) {
	var ra, rb T
	var err error
	first, second := a, b
	pa, pb := &ra, &rb
	if round%2 == 1 {
		first, second = b, a
		pa, pb = &rb, &ra
	}
	if *pa, err = first(); err != nil {
		return ra, rb, err
	}
	if *pb, err = second(); err != nil {
		return ra, rb, err
	}
	return ra, rb, nil
}

// runBreakdown traces one `sluice run -- true` with strace and writes where
// its time goes, under a heading that says in which situation (where). It
// is best effort: without strace it says how to get it.
func runBreakdown(ctx context.Context, w io.Writer, sluice, tmp, where string) error {
	strace, err := exec.LookPath("strace")
	if err != nil {
		fmt.Fprintln(w, "Install strace (apt-get install strace) for a breakdown of where `sluice run` spends its time.")
		return nil
	}
	out := filepath.Join(tmp, "strace.txt")
	defer os.Remove(out)
	cmd := sluiceRunTrue(ctx, sluice, strace, "-f", "-T", "-qq", "-o", out)
	cmd.Dir = "/"
	wall, err := runCommand(cmd)
	if err != nil {
		return fmt.Errorf("traced run: %w", err)
	}
	f, err := os.Open(out)
	if err != nil {
		return fmt.Errorf("read strace output: %w", err)
	}
	defer f.Close()
	costs, err := parseStrace(f)
	if err != nil {
		return fmt.Errorf("parse strace output: %w", err)
	}
	fmt.Fprintf(w, "One `sluice run -- true` %s, under `strace -f -T` (%s wall, strace's own overhead included): system calls by time spent in them, waits (futex, nanosleep, epoll, waitid) left out:\n\n", where, fmtNS(float64(wall)))
	fmt.Fprintln(w, "| system call | calls | time |")
	fmt.Fprintln(w, "| --- | ---: | ---: |")
	var rest time.Duration
	var restCalls int
	for i, c := range costs {
		if i < 10 {
			fmt.Fprintf(w, "| %s | %d | %s |\n", c.what, c.calls, fmtNS(float64(c.total)))
			continue
		}
		rest += c.total
		restCalls += c.calls
	}
	if restCalls > 0 {
		fmt.Fprintf(w, "| everything else | %d | %s |\n", restCalls, fmtNS(float64(rest)))
	}
	return nil
}
