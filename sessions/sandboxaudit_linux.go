// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"time"

	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/kaudit"
)

// sandboxDenial hands a Landlock refusal (package kaudit: ptrace,
// pidfd_getfd, process_vm_*, /proc/PID/mem, signals to processes outside
// the session) to the session it belongs to, as a sandbox_denied event.
// Refusals of other services' sessions and of programs that are no
// session's are not this service's to report.
func (sv *Service) sandboxDenial(d kaudit.Denial) {
	name := sv.sandboxAttr.Session(d)
	if name == "" || sv.e.DatapathExplains(d) {
		return
	}
	ss := sv.Lookup(name)
	if ss == nil {
		return
	}
	e := audit.FromLandlock(name, d)
	if sv.cfg.OnSandboxDenied != nil {
		sv.cfg.OnSandboxDenied(e.Access)
	}
	ss.waitStarted()
	ss.Deliver(e)
}

// sandboxStarted registers a session's command: its shim made the
// session's Landlock domain.
func (sv *Service) sandboxStarted(pid int, name string) {
	sv.sandboxAttr.AddCreator(uint32(pid), name)
}

// sandboxEnded waits for the refusals the kernel has sent for a session
// whose command exited, so that they come before its end, and forgets the
// session's domain.
func (sv *Service) sandboxEnded(pid int, name string) {
	if sv.sandboxWatch == nil {
		return
	}
	if on, err := kaudit.Status(); err == nil && on {
		sv.sandboxWatch.Drain(300 * time.Millisecond)
	}
	if pid > 0 {
		sv.sandboxAttr.RemoveCreator(uint32(pid), name)
	}
}
