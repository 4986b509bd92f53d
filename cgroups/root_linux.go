// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"
)

// OpenRoot makes sure the cgroup <mount>/<name> exists as a root-owned 0755
// directory and returns it. It refuses an existing directory owned by another
// user, because that user could have been delegated control of the subtree.
//
// It then tries to enable the "pids" and "memory" controllers for the root's
// children, in the mount root's cgroup.subtree_control first when needed, and
// records which ones succeeded (Controllers) and why the others did not: their
// absence is not an error, since a hybrid layout binds them to cgroup v1.
// Enabling them in the mount root is a machine-wide setting, but one that
// changes nothing for cgroups that do not set limits.
//
// Calling OpenRoot again for an existing root is safe and reclaims it, for
// instance after a restart; Sessions lists what it already holds.
func OpenRoot(name string) (*Root, error) {
	if err := validName(name); err != nil {
		return nil, fmt.Errorf("cgroups: root: %w", err)
	}
	mount, entries, err := findMount()
	if err != nil {
		return nil, err
	}
	r := &Root{mount: mount, name: name}
	if err := r.ensureDir(); err != nil {
		return nil, err
	}
	if err := r.liftFence(); err != nil {
		return nil, err
	}
	if err := r.enableControllers(wantedControllers, entries); err != nil {
		return nil, err
	}
	return r, nil
}

// ensureDir creates the root or checks the one that is there.
func (r *Root) ensureDir() error {
	err := mkdirBeneath(r.mount, "", r.name)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cgroups: create root: %w", err)
	}
	fd, err := openBeneath(r.mount, r.name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("cgroups: open root: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("cgroups: stat root %s: %w", r.Path(), err)
	}
	if st.Uid != 0 {
		return fmt.Errorf("cgroups: root %s is owned by uid %d, not root: refusing it, since its owner may control the sessions below it", r.Path(), st.Uid)
	}
	// mkdir honours the umask; a group- or world-writable root would let others
	// create cgroups under it.
	if st.Mode&0o7777 != 0o755 {
		if err := unix.Fchmod(fd, 0o755); err != nil {
			return fmt.Errorf("cgroups: chmod 0755 %s: %w", r.Path(), err)
		}
	}
	return nil
}

// ID returns the root's cgroup id (what bpf_get_current_cgroup_id would
// return for a process in it).
func (r *Root) ID() (uint64, error) {
	return cgroupIDOf(r.mount, r.rel())
}

// NewSession creates the session cgroup <root>/<name>. It fails, wrapping
// fs.ErrExist, when the session exists already: a leftover may still hold
// processes, so reclaiming one is an explicit choice (Session, Remove).
// Names are 1 to 128 bytes of letters, digits and . _ - @ +, starting with a
// letter or digit; anything else wraps ErrInvalidName.
func (r *Root) NewSession(name string) (*Session, error) {
	if err := validName(name); err != nil {
		return nil, fmt.Errorf("cgroups: session: %w", err)
	}
	if r.slice != "" {
		return r.newScope(name)
	}
	if err := mkdirBeneath(r.mount, r.name, name); err != nil {
		return nil, fmt.Errorf("cgroups: create session: %w", err)
	}
	return r.Session(name)
}

// Session returns the existing session cgroup called name, wrapping
// fs.ErrNotExist when there is none.
func (r *Root) Session(name string) (*Session, error) {
	if err := validName(name); err != nil {
		return nil, fmt.Errorf("cgroups: session: %w", err)
	}
	return r.session(name)
}

// session skips name validation so that Sessions can return children that
// someone else created with names sluice would not choose.
func (r *Root) session(name string) (*Session, error) {
	id, err := cgroupIDOf(r.mount, r.rel(name))
	if err != nil {
		return nil, fmt.Errorf("cgroups: session %q: %w", name, err)
	}
	return &Session{root: r, name: name, id: id}, nil
}

// Sessions returns the root's child cgroups, sorted by name: the sessions of
// this run and any left over by an earlier one, to reclaim or remove.
func (r *Root) Sessions() ([]*Session, error) {
	fd, err := openBeneath(r.mount, r.name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("cgroups: list sessions: %w", err)
	}
	dir := os.NewFile(uintptr(fd), r.Path())
	defer dir.Close()
	ents, err := dir.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("cgroups: list sessions in %s: %w", r.Path(), err)
	}
	var out []*Session
	for _, e := range ents {
		if !e.IsDir() {
			continue // interface files such as cgroup.procs
		}
		s, err := r.session(e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while we listed
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Session) int { return cmp.Compare(a.name, b.name) })
	return out, nil
}

// Remove removes the root cgroup. The kernel refuses while sessions remain
// (EBUSY): remove them first. A root that is already gone is not an error.
func (r *Root) Remove() error {
	if r.slice != "" {
		return r.stopSlice()
	}
	err := rmdirBeneath(r.mount, "", r.name)
	switch {
	case err == nil, errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("cgroups: remove root %s: it still has sessions or processes: %w", path.Join(r.mount, r.name), err)
	default:
		return fmt.Errorf("cgroups: remove root: %w", err)
	}
}
