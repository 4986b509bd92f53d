// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// result is the probe's JSON line. Field names are part of the contract with
// the tests (tests/world.ProbeResult mirrors them).
type result struct {
	Op    string `json:"op"`
	OK    bool   `json:"ok"`
	Errno string `json:"errno,omitempty"`
	Error string `json:"error,omitempty"`
	// Stage names the syscall (or step) that failed, e.g. "socket",
	// "setsockopt", "connect": an EPERM from socket() means something quite
	// different from an EPERM from connect().
	Stage string `json:"stage,omitempty"`
	// Timeout is set when the probe gave up waiting, as opposed to the
	// kernel returning an error.
	Timeout bool `json:"timeout,omitempty"`
	// Unsupported is set when the kernel lacks the protocol (sctp).
	Unsupported bool `json:"unsupported,omitempty"`

	Reply      string  `json:"reply,omitempty"`       // what the peer answered
	Sent       int     `json:"sent,omitempty"`        // datagrams (sendmmsg) or bytes in the SYN (tfo)
	PID        int     `json:"pid,omitempty"`         // daemonize: the grandchild
	Escapes    []move  `json:"escapes,omitempty"`     // escape-cgroup attempts
	CgroupFrom string  `json:"cgroup_from,omitempty"` // escape-cgroup: cgroup before the attempts
	CgroupTo   string  `json:"cgroup_to,omitempty"`   // escape-cgroup: cgroup after them
	Action     *result `json:"action,omitempty"`      // escape-cgroup: the wrapped action's result

	Rcode   string   `json:"rcode,omitempty"`   // dns: the reply's rcode
	Answers []string `json:"answers,omitempty"` // dns, resolve: addresses (and CNAME targets) answered
	From    string   `json:"from,omitempty"`    // dns: the reply's source (recvfrom) or peer (getpeername)
	Note    string   `json:"note,omitempty"`    // tls-attack: what the kernel showed beside the outcome
}

// stageError tags an error with the step that produced it.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.stage + ": " + e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

// at wraps err with the step that produced it; nil stays nil.
func at(stage string, err error) error {
	if err == nil {
		return nil
	}
	return &stageError{stage: stage, err: err}
}

// resultError carries a wrapped action's failure up unchanged.
type resultError struct{ r *result }

func (e resultError) Error() string { return e.r.Error }

// timeoutError is the probe giving up, distinct from a kernel ETIMEDOUT.
type timeoutError struct{ d time.Duration }

func (e timeoutError) Error() string { return fmt.Sprintf("no answer within %v", e.d) }

// errTimeout reports that the action's deadline passed.
func errTimeout() error { return timeoutError{timeout} }

// setErr records err (if any) in r: ok, errno, error, stage, timeout.
func (r *result) setErr(err error) {
	if err == nil {
		r.OK = true
		return
	}
	r.OK = false
	r.Error = err.Error()
	var nested resultError
	if errors.As(err, &nested) {
		r.Errno, r.Stage, r.Timeout, r.Unsupported = nested.r.Errno, nested.r.Stage, nested.r.Timeout, nested.r.Unsupported
		return
	}
	var se *stageError
	if errors.As(err, &se) {
		r.Stage = se.stage
	}
	var errno unix.Errno
	var te timeoutError
	switch {
	case errors.As(err, &errno):
		r.Errno = unix.ErrnoName(errno)
		if r.Errno == "" {
			r.Errno = fmt.Sprintf("errno %d", int(errno))
		}
	case errors.As(err, &te):
		r.Errno = "ETIMEDOUT"
		r.Timeout = true
	}
}
