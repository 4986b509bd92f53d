// SPDX-License-Identifier: Apache-2.0

package preflight

import "strings"

// Status is the outcome of one check.
type Status int

// The outcomes, mildest first.
const (
	// Pass: the check found what sluice needs.
	Pass Status = iota
	// Warn: enforcement works, something optional is missing.
	Warn
	// Fail: enforcement is impossible until fixed.
	Fail
)

// String is the status as `sluice check` prints it at the start of a line
// (scripts grep for "ok", "warn" and "FAIL").
func (s Status) String() string {
	switch s {
	case Pass:
		return "ok"
	case Warn:
		return "warn"
	case Fail:
		return "FAIL"
	}
	return "?"
}

// Result is one check: one line of `sluice check`.
type Result struct {
	// Name is what was checked ("bpf syscall", "mode landlock", ...).
	Name   string
	Status Status
	// Detail is what was found.
	Detail string
	// Fix is how to fix it, when the status is not Pass ("" when there is
	// nothing to say).
	Fix string
}

// Options are what the checks cannot find out for themselves.
type Options struct {
	// Socket is the daemon's API socket: a daemon answering there makes
	// mode bpf available through it, and its DNS path is the one in force.
	Socket string
	// DNSPathDefault is the DNS path of `sluice run` without a daemon.
	DNSPathDefault string
}

// Failed reports whether any result is a Fail: kernel enforcement is not
// possible on this machine.
func Failed(rs []Result) bool {
	for _, r := range rs {
		if r.Status == Fail {
			return true
		}
	}
	return false
}

// modeStatus is a mode's status from its detail: a missing mode is a
// warning, not a failure; the bpf checks already fail when kernel
// enforcement is impossible.
func modeStatus(detail string) Status {
	if strings.HasPrefix(detail, "unavailable") {
		return Warn
	}
	return Pass
}

// dnsPathDetail says what DNS path path ("auto", "kernel", "resolver")
// means for a session's queries.
func dnsPathDetail(path string) string {
	switch path {
	case "kernel":
		return "kernel: UDP DNS goes straight to the upstream, judged and learned by the datapath; the resolver answers the rest"
	case "resolver":
		return "resolver: every query goes through the session's local resolver; none resolves while it is down"
	}
	return path + ": queries go through the session's local resolver (and its cache); while it is down (its daemon restarting), " +
		"UDP DNS goes straight to the upstream, judged and learned by the datapath"
}

// firstLineOf is s up to its first newline: a verifier log's first line
// says why; the rest is the log.
func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
