// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"time"

	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/kaudit"
)

// watchSandbox starts reading the kernel's Landlock audit records (package
// kaudit), so that a refusal by a session's sandbox (ptrace, pidfd_getfd,
// process_vm_*, /proc/PID/mem, signals to processes outside it) becomes a
// sandbox_denied line, in the audit log, the metrics and the session's
// stream, like a datapath denial. The daemon subscribes whether or not
// the machine's audit is on now: auditd may start after it. Where the
// records cannot be read (no CAP_AUDIT_READ) it says so once and goes on.
func (s *Server) watchSandbox() {
	s.sandboxAttr = &kaudit.Attributor{SessionOf: s.e.SessionOfPID}
	w, err := kaudit.Start(s.sandboxDenial)
	if err != nil {
		s.logf("sandbox refusals will not be explained: %v", err)
		return
	}
	s.sandboxWatch = w
	go func() {
		<-s.stop
		_ = w.Close()
	}()
}

// sandboxDenial hands a refusal to the daemon's session it belongs to.
// Refusals of other sessions (embedded `sluice run` reports its own) and
// of programs that are no session's are not the daemon's to report.
func (s *Server) sandboxDenial(d kaudit.Denial) {
	name := s.sandboxAttr.Session(d)
	if name == "" || s.e.DatapathExplains(d) {
		return
	}
	s.mu.Lock()
	ss := s.sessions[name]
	s.mu.Unlock()
	if ss == nil {
		return
	}
	e := audit.FromLandlock(name, d)
	if s.metrics != nil {
		s.metrics.sandbox.WithLabelValues(e.Access).Inc()
	}
	select {
	case <-ss.started:
	case <-time.After(time.Second):
	}
	ss.deliver(e)
}

// sandboxStarted registers a session's command: its shim made the
// session's Landlock domain.
func (s *Server) sandboxStarted(pid int, name string) {
	if s.sandboxAttr != nil {
		s.sandboxAttr.AddCreator(uint32(pid), name)
	}
}

// sandboxEnded waits for the refusals the kernel has sent for a session
// whose command exited, so that they come before its end, and forgets the
// session's domain.
func (s *Server) sandboxEnded(pid int, name string) {
	if s.sandboxWatch == nil {
		return
	}
	if on, err := kaudit.Status(); err == nil && on {
		s.sandboxWatch.Drain(300 * time.Millisecond)
	}
	if pid > 0 {
		s.sandboxAttr.RemoveCreator(uint32(pid), name)
	}
}
