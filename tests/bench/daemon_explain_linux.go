// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
)

// explainSessions is how many sessions each breakdown watches: enough to
// average, few enough that tracing stays within the budget.
const explainSessions = 20

// explain writes where a daemon session's time goes into res.breakdown,
// when the target was missed: the daemon's system calls under strace
// (wall time, waits in the kernel included), then its CPU under perf
// (kernel and Go frames). Both watch the daemon process itself; an
// in-process daemon under Go's own profiler was tried and rejected, as it
// saw half of the CPU time rusage counted and none of the HTTP side.
// Best effort, and only with time left in the budget.
func (h *daemonHarness) explain(ctx context.Context, res *daemonResult, dir string) {
	w := &res.breakdown
	enough := func(d time.Duration) bool {
		dl, ok := ctx.Deadline()
		return !ok || time.Until(dl) > d
	}
	if enough(15 * time.Second) {
		fmt.Fprintln(os.Stderr, "bench: daemon: tracing the daemon's system calls")
		if err := h.straceSessions(ctx, w, dir); err != nil {
			fmt.Fprintf(os.Stderr, "bench: daemon breakdown (strace): %v\n", err)
		}
	}
	if enough(15 * time.Second) {
		fmt.Fprintln(os.Stderr, "bench: daemon: profiling the daemon's CPU")
		if err := h.perfSessions(ctx, w, dir); err != nil {
			fmt.Fprintf(os.Stderr, "bench: daemon breakdown (perf): %v\n", err)
		}
	}
}

// runTrues runs n sessions of `true` and returns their total wall time.
func (h *daemonHarness) runTrues(ctx context.Context, n int) (time.Duration, error) {
	begin := time.Now()
	for range n {
		if _, _, _, err := h.run(ctx, sessionTimeout, []string{h.truePath}, nil); err != nil {
			return 0, err
		}
	}
	return time.Since(begin), nil
}

// tool is a tracer or profiler watching the daemon; stop ends it with
// SIGINT, on which both strace and perf detach and write what they have.
type tool struct {
	cmd     *exec.Cmd
	stderr  strings.Builder
	stopped bool
}

func startTool(ctx context.Context, name string, args ...string) (*tool, error) {
	t := &tool{cmd: exec.CommandContext(ctx, name, args...)}
	t.cmd.Stderr = &t.stderr
	t.cmd.Cancel = func() error { return t.cmd.Process.Signal(os.Interrupt) }
	t.cmd.WaitDelay = 10 * time.Second
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return t, nil
}

func (t *tool) stop() error {
	if t.stopped {
		return nil
	}
	t.stopped = true
	_ = t.cmd.Process.Signal(os.Interrupt)
	if err := t.cmd.Wait(); err != nil {
		var ee *exec.ExitError
		// Interrupted, perf exits with the signal's status; what it
		// wrote is whole all the same.
		if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
			return nil
		}
		return fmt.Errorf("%s: %w%s", filepath.Base(t.cmd.Path), err, quoteOutput(t.stderr.String()))
	}
	return nil
}

// straceSessions traces the daemon (every thread, and the commands it
// forks) while it runs explainSessions sessions of `true`, and writes its
// system calls by time spent in them, per session, bpf(2) calls named by
// the map they work on.
func (h *daemonHarness) straceSessions(ctx context.Context, w io.Writer, dir string) error {
	strace, err := exec.LookPath("strace")
	if err != nil {
		fmt.Fprintln(w, "Install strace (apt-get install strace) for a breakdown of the daemon's system calls.")
		return nil
	}
	n := explainSessions
	out := filepath.Join(dir, "daemon-strace.txt")
	t, err := startTool(ctx, strace, "-f", "-T", "-qq", "-o", out, "-p", strconv.Itoa(h.d.pid()))
	if err != nil {
		return err
	}
	defer t.stop()
	if err := waitTraced(ctx, h.d.pid(), 5*time.Second); err != nil {
		return fmt.Errorf("%w%s", err, quoteOutput(t.stderr.String()))
	}
	wall, err := h.runTrues(ctx, n)
	if err != nil {
		return err
	}
	if err := t.stop(); err != nil {
		return err
	}
	// The daemon's map descriptors outlive the trace; the ones sessions
	// open and close (their ring buffers) keep their number only while
	// open, and stay unnamed.
	names := bpfMapNames(h.d.pid())
	b, err := os.ReadFile(out)
	if err != nil {
		return fmt.Errorf("read strace output: %w", err)
	}
	var named strings.Builder
	for line := range strings.Lines(string(b)) {
		named.WriteString(nameMapFD(line, names))
	}
	costs, err := parseStrace(strings.NewReader(named.String()))
	if err != nil {
		return fmt.Errorf("parse strace output: %w", err)
	}
	fmt.Fprintf(w, "Where a daemon session's wall time goes: %d sessions of `true` with the daemon under `strace -f -T` (%s each, strace's overhead included; the commands it forks are traced too). "+
		"System calls by time spent in them, per session, waits (futex, epoll, waitid...) left out; a bpf(2) call on a map is named by the map:\n\n", n, fmtNS(float64(wall)/float64(n)))
	fmt.Fprintln(w, "| system call | calls per session | time per session |")
	fmt.Fprintln(w, "| --- | ---: | ---: |")
	var rest time.Duration
	var restCalls int
	for i, c := range costs {
		if i < 12 {
			fmt.Fprintf(w, "| %s | %.1f | %s |\n", c.what, float64(c.calls)/float64(n), fmtNS(float64(c.total)/float64(n)))
			continue
		}
		rest += c.total
		restCalls += c.calls
	}
	if restCalls > 0 {
		fmt.Fprintf(w, "| everything else | %.1f | %s |\n", float64(restCalls)/float64(n), fmtNS(float64(rest)/float64(n)))
	}
	fmt.Fprintln(w)
	return nil
}

// bpfMapNames names the daemon's open map descriptors, from their map id
// in /proc/<pid>/fdinfo and the kernel's information on that map.
func bpfMapNames(pid int) map[int]string {
	names := map[int]string{}
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return names
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		v, err := procStatusField(b, "map_id")
		if err != nil {
			continue // not a map
		}
		id, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			continue
		}
		m, err := ebpf.NewMapFromID(ebpf.MapID(id))
		if err != nil {
			continue
		}
		if info, err := m.Info(); err == nil && info.Name != "" {
			names[fd] = info.Name
		}
		m.Close()
	}
	return names
}

// perfSessions samples the daemon's CPU (kernel and Go frames, every
// thread, with callers) while it runs explainSessions sessions of `true`,
// and writes where it goes: sluice's functions with their callees, then
// the kernel functions that burn it.
func (h *daemonHarness) perfSessions(ctx context.Context, w io.Writer, dir string) error {
	perf, err := exec.LookPath("perf")
	if err != nil {
		fmt.Fprintln(w, "Install perf (apt-get install linux-perf) for a profile of the daemon's CPU.")
		return nil
	}
	n := explainSessions
	data := filepath.Join(dir, "daemon-perf.data")
	t, err := startTool(ctx, perf, "record", "-q", "-F", "1999", "-g", "-o", data, "-p", strconv.Itoa(h.d.pid()))
	if err != nil {
		return err
	}
	defer t.stop()
	// perf says nothing when it is ready; its events are on by the time
	// it has opened its output, give or take.
	if err := waitFile(ctx, data, 5*time.Second); err != nil {
		return fmt.Errorf("perf record: %w%s", err, quoteOutput(t.stderr.String()))
	}
	time.Sleep(200 * time.Millisecond)
	cpu0, err := h.d.cpu()
	if err != nil {
		return err
	}
	if _, err := h.runTrues(ctx, n); err != nil {
		return err
	}
	cpu1, err := h.d.cpu()
	if err != nil {
		return err
	}
	if err := t.stop(); err != nil {
		return err
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", h.d.pid()))
	if err != nil {
		return fmt.Errorf("daemon command name: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(rctx, perf, "report", "-i", data, "--stdio", "--children", "--sort", "sym", "-g", "none",
		"--comms", strings.TrimSpace(string(comm)), "--percent-limit", "1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("perf report: %w%s", err, quoteOutput(stderr.String()))
	}
	lines, err := parsePerfReport(bufio.NewScanner(strings.NewReader(string(out))))
	if err != nil {
		return err
	}
	perSession := float64(cpu1-cpu0) / float64(n)
	fmt.Fprintf(w, "Where a daemon session's CPU goes: %d sessions of `true` with the daemon under `perf record -g` (all its threads; %s of CPU per session, user+system, by /proc). "+
		"Share of the daemon's CPU samples, and what that is per session; sluice's functions with their callees (a chain of callers with one share is one cost), then the kernel functions where the time is spent themselves:\n\n", n, fmtNS(perSession))
	fmt.Fprintln(w, "| function | share of the daemon's CPU | per session |")
	fmt.Fprintln(w, "| --- | ---: | ---: |")
	for _, l := range topPerf(lines, 10, 6) {
		share := l.children
		if l.kernel {
			share = l.self
		}
		fmt.Fprintf(w, "| %s | %.0f%% | %s |\n", l.label(), share, fmtNS(perSession*share/100))
	}
	fmt.Fprintln(w)
	return nil
}

// waitFile waits until path exists.
func waitFile(ctx context.Context, path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %s", path, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitTraced waits until every thread of pid has a tracer.
func waitTraced(ctx context.Context, pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return fmt.Errorf("list the daemon's threads: %w", err)
		}
		traced := 0
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
			if err != nil {
				continue
			}
			if v, err := procStatusField(b, "TracerPid"); err == nil && v != "0" {
				traced++
			}
		}
		if traced == len(tasks) && traced > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("strace attached to %d of the daemon's %d threads within %s", traced, len(tasks), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
