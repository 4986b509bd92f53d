// SPDX-License-Identifier: Apache-2.0

// Package needs decides what a kernel test does when this machine lacks
// something it needs, and checks a kernel suite's preconditions once, at its
// start, so a machine that cannot run the suite gets one message naming
// every missing piece with its fix instead of dozens of unrelated failures.
//
// Decisions:
//   - Two kinds of skip. Skip is for what the suite needs and a machine can
//     be given (root, a cgroup2 mount, IPv6, a writable /proc/sys, the
//     capabilities, the tools): without the switch it skips, as the tests
//     always did for a developer without root; with SLUICE_REQUIRE_KERNEL=1
//     (which CI sets) it fails, so CI can never pass with its kernel suites
//     skipped. Absent is for a kernel that lacks the very feature whose
//     abuse the test guards against (SCTP, AF_VSOCK, MPTCP, io_uring turned
//     off, unprivileged user namespaces turned off, cgroup controllers that a
//     hybrid layout keeps on v1): there is nothing to contain, so it stays a
//     skip that says so, also in CI.
//   - Tests that need enough kernel events for a rate limit to show
//     (Enough) retry a bounded number of times under the switch and then
//     fail; without it they skip as before.
//   - The checks read the kernel's own files (/proc/self/mountinfo,
//     /proc/self/status, /proc/sys) and PATH; they change nothing.
package needs

import (
	"fmt"
	"os"
	"testing"
)

// Env is the switch that turns the skips of the kernel suites into
// failures. CI (.ci/run) sets it to 1.
const Env = "SLUICE_REQUIRE_KERNEL"

// Required reports whether the kernel suites must run (Env is set to
// anything but "" or "0").
func Required() bool {
	v := os.Getenv(Env)
	return v != "" && v != "0"
}

// Skip skips t because this machine lacks something the test needs and
// could be given; under the switch it fails t instead.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s\n(%s=1: a kernel test must run here, not skip)", msg, Env)
		return
	}
	t.Skip(msg)
}

// Absent skips t because the kernel lacks the feature the test guards
// against, so there is nothing to contain. It is a skip also under the
// switch; the message says so.
func Absent(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Skipf("%s (absent from this kernel, nothing to contain: a skip even with %s=1)", fmt.Sprintf(format, args...), Env)
}

// Attempts is how many times a test that needs the kernel to deliver
// enough events may try: once without the switch (it then skips), three
// times under it (it then fails).
func Attempts() int {
	if Required() {
		return 3
	}
	return 1
}

// Enough ends a test whose attempts all fell short of the events it needs
// (a flood the kernel's ring partly dropped, a loop too slow to exceed a
// rate limit): a skip without the switch, a failure under it.
func Enough(t testing.TB, attempts int, format string, args ...any) {
	t.Helper()
	Skip(t, "%s (after %d attempt(s))", fmt.Sprintf(format, args...), attempts)
}
