// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"fmt"
	"strconv"
)

// Move moves the running process pid, with all of its threads, into the
// session: a write to cgroup v2's cgroup.procs, which takes a thread
// group whole. What the process starts afterwards is born in the session;
// sockets it made before keep the cgroup they were made in (the kernel
// records a socket's cgroup at creation).
//
// A pid names whatever process holds it at the moment of the write: a
// caller that must move one particular process holds a pidfd for it and
// checks afterwards that it is still alive (then the pid was still its).
// The caller must be allowed to write the session's cgroup.procs and the
// process's current one (root is).
//
// The placeholder of a systemd scope created by NewSession has done its
// job once a process was to take its place: it is ended whatever came of
// the write, so that a failed move leaves an empty scope for its owner to
// remove, not one held open by a sleeping stub.
func (s *Session) Move(pid int) error {
	defer s.releaseStub()
	if pid <= 0 {
		return fmt.Errorf("cgroups: session %s: move pid %d: not a process id", s.name, pid)
	}
	if err := writeFile(s.root.mount, s.rel("cgroup.procs"), strconv.Itoa(pid)); err != nil {
		return wrapSession(s, err)
	}
	return nil
}
