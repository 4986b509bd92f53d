// SPDX-License-Identifier: Apache-2.0

package needs

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// Need is one precondition of the kernel suites.
type Need int

// The preconditions. Each has a check (check_linux.go) and a fix.
const (
	Root    Need = iota // effective uid 0
	Caps                // the capabilities the suites use
	Cgroup2             // a writable cgroup2 mount
	IPv6                // IPv6 in the kernel and on in this namespace
	ProcSys             // /proc/sys writable (per-namespace sysctls, ns_last_pid)
	HostPID             // the host's PID namespace (the kernel reports host pids)
	Tools               // nsenter, unshare, setpriv, ip, go in PATH
	numNeeds
)

// Kernel is every precondition: what the suites that run sluice in a test
// world need.
var Kernel = []Need{Root, Caps, Cgroup2, IPv6, ProcSys, HostPID, Tools}

// World is what a test world (tests/world) alone needs: namespaces, veth,
// per-namespace sysctls, the sniffer, nsenter.
var World = []Need{Root, Caps, IPv6, ProcSys, Tools}

// Datapath is what loading the datapath or creating cgroups needs.
var Datapath = []Need{Root, Caps, Cgroup2}

// Missing is one unmet precondition and how to meet it.
type Missing struct {
	What string // what is missing, as found
	Fix  string // the command or flag that provides it
}

func (m Missing) String() string { return m.What + "\n      fix: " + m.Fix }

// Message is the one report of a suite that cannot run: every missing
// precondition with its fix, and what happens now.
func Message(suite string, missing []Missing) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: this machine cannot run the kernel tests; missing:\n", suite)
	for _, m := range missing {
		fmt.Fprintf(&b, "  - %s\n", m)
	}
	if Required() {
		fmt.Fprintf(&b, "%s=1: failing instead of skipping every test.\n", Env)
	} else {
		fmt.Fprintf(&b, "every test that needs them skips (%s=1 makes that a failure, as in CI).\n", Env)
	}
	return b.String()
}

var cache struct {
	sync.Mutex
	done    [numNeeds]bool
	missing [numNeeds][]Missing
}

// Check returns what of needs is missing on this machine, each check run
// once per test binary. Without root the rest is not checked: it is the
// one thing to fix first.
func Check(needs ...Need) []Missing {
	cache.Lock()
	defer cache.Unlock()
	var out []Missing
	for _, n := range needs {
		if n < 0 || n >= numNeeds {
			continue
		}
		if !cache.done[n] {
			cache.missing[n] = check(n)
			cache.done[n] = true
		}
		out = append(out, cache.missing[n]...)
		if n == Root && len(cache.missing[n]) > 0 {
			return out
		}
	}
	return out
}

// Ready is for a kernel suite's TestMain: it checks needs and, when any is
// missing, writes Message to stderr and returns false. The caller then
// returns 1 under the switch (one failure, one message) or runs the tests,
// which skip through Have.
func Ready(suite string, needs ...Need) bool {
	missing := Check(needs...)
	if len(missing) == 0 {
		return true
	}
	fmt.Fprint(os.Stderr, Message(suite, missing))
	return false
}

// Main is the whole TestMain decision for a kernel suite: it returns
// (0, true) when needs are met, so the suite sets up and runs; otherwise
// it has written the message, and returns (1, false) under the switch, or
// (m.Run(), false) without it, every test skipping through Have.
func Main(m *testing.M, suite string, needs ...Need) (code int, ready bool) {
	if Ready(suite, needs...) {
		return 0, true
	}
	if Required() {
		return 1, false
	}
	return m.Run(), false
}

// Have skips t (fails it under the switch) unless every one of needs is
// met, naming what is missing and its fix.
func Have(t testing.TB, needs ...Need) {
	t.Helper()
	missing := Check(needs...)
	if len(missing) == 0 {
		return
	}
	lines := make([]string, len(missing))
	for i, m := range missing {
		lines[i] = m.String()
	}
	Skip(t, "needs what this machine lacks:\n  - %s", strings.Join(lines, "\n  - "))
}
