// SPDX-License-Identifier: Apache-2.0

package main

import (
	"time"

	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/kaudit"
)

// sandboxWatch explains the refusals of an embedded session's Landlock
// domain (package kaudit): each becomes a line on the terminal and in the
// --audit-log, like the datapath's denials. It is nil where the kernel
// cannot give the records (audit off, Landlock before ABI 7, no
// CAP_AUDIT_READ): the refusals still happen, unexplained, and `sluice
// check` says why.
type sandboxWatch struct {
	w *kaudit.Watch
	a *kaudit.Attributor
}

// watchSandbox starts reading for session (its name) and hands each of its
// refusals to report.
func watchSandbox(e *enforcer.Enforcer, session string, report func(audit.Event)) *sandboxWatch {
	if on, err := kaudit.Status(); err != nil || !on {
		return nil
	}
	a := &kaudit.Attributor{SessionOf: e.SessionOfPID}
	w, err := kaudit.Start(func(d kaudit.Denial) {
		// Attributed first either way: a domain's first refusal names
		// its creator.
		if a.Session(d) == session && !e.DatapathExplains(d) {
			report(audit.FromLandlock(session, d))
		}
	})
	if err != nil {
		return nil
	}
	return &sandboxWatch{w: w, a: a}
}

// started registers the command's pid: its shim made the domain.
func (sw *sandboxWatch) started(pid int, session string) {
	if sw != nil {
		sw.a.AddCreator(uint32(pid), session)
	}
}

// finish reports what the kernel has sent for the session so far (the
// command has exited: its refusals are written) and stops reading.
func (sw *sandboxWatch) finish() {
	if sw == nil {
		return
	}
	sw.w.Drain(500 * time.Millisecond)
	_ = sw.w.Close()
}
