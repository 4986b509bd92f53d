// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Root is the root-owned parent cgroup that holds one child cgroup per
// session. Obtain one with OpenRoot; the zero value is not usable.
type Root struct {
	mount       string            // cgroup2 mount point
	name        string            // directory name directly under mount
	controllers []string          // enabled for sessions, sorted
	unavailable map[string]string // wanted controller -> why sessions lack it
	// slice is set when systemd manages the tree (OpenSystemdRoot): the
	// root is this slice unit's cgroup and each session a transient scope
	// in it.
	slice string
}

// Slice returns the systemd slice unit whose cgroup the root is, or "" when
// sluice manages the root itself (OpenRoot).
func (r *Root) Slice() string { return r.slice }

// SessionName turns base, a name of the caller's choosing, into the name of
// a session cgroup: base itself, or under systemd the name of the session's
// transient scope unit, <slice prefix>-<base>.scope.
func (r *Root) SessionName(base string) string {
	if r.slice == "" {
		return base
	}
	return strings.TrimSuffix(r.slice, ".slice") + "-" + base + ".scope"
}

// Name returns the root's directory name under the cgroup2 mount.
func (r *Root) Name() string { return r.name }

// Path returns the root's absolute cgroupfs path, such as
// /sys/fs/cgroup/unified/sluice on a hybrid machine.
func (r *Root) Path() string { return filepath.Join(r.mount, r.name) }

// Controllers returns the controllers usable in session cgroups, sorted; a
// subset of "memory" and "pids". On a hybrid layout it is often empty.
func (r *Root) Controllers() []string { return slices.Clone(r.controllers) }

// controllerErr returns nil when sessions have controller, else a
// *ControllerError carrying the reason found by OpenRoot.
func (r *Root) controllerErr(controller string) error {
	if slices.Contains(r.controllers, controller) {
		return nil
	}
	reason := r.unavailable[controller]
	if reason == "" {
		reason = "sluice does not enable it"
	}
	return &ControllerError{Controller: controller, Reason: reason}
}

// rel joins names below the mount with '/', the separator cgroupfs uses.
func (r *Root) rel(elem ...string) string {
	return path.Join(append([]string{r.name}, elem...)...)
}

// Session is one session's cgroup, a child of a Root. Its processes live in
// it directly; it has no children of its own.
type Session struct {
	root *Root
	name string
	id   uint64
	// stub holds a systemd scope open from its creation until the
	// session's first command is in it (systemd_linux.go).
	stub *os.Process
}

// Name returns the session's directory name under its root.
func (s *Session) Name() string { return s.name }

// Path returns the session's absolute cgroupfs path.
func (s *Session) Path() string { return filepath.Join(s.root.Path(), s.name) }

// ID returns the session's cgroup id: the value bpf_get_current_cgroup_id
// returns for its processes, and the key the datapath uses for the session.
// It was read when the Session value was created; a cgroup removed and
// created again under the same name gets a new id.
func (s *Session) ID() uint64 { return s.id }

// rel returns a path inside the session's directory, relative to the mount.
func (s *Session) rel(file ...string) string {
	return s.root.rel(append([]string{s.name}, file...)...)
}
