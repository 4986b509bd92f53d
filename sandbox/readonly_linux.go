// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// roPath is a read-only path as Enter found it: resolved (symlinks
// followed, as the kernel follows them for every later reader) in the
// session's mount namespace.
type roPath struct {
	name, real string
	machine    bool
}

// makeReadOnly makes each path of r, and everything below it, read-only
// in the calling thread's mount namespace (see ReadOnly). For each path:
// the directories above it that uid could rename are bound onto
// themselves (a mount point cannot be renamed: otherwise the session
// could move the protected tree aside and make a writable one under its
// name), the path is bound onto itself recursively unless it is a mount
// root already, and that mount and every mount below it get
// MOUNT_ATTR_RDONLY with mount_setattr(2), which changes that one flag
// and keeps nosuid, nodev, noexec and the rest as they were. The mounts
// are the session namespace's own copies: nothing changes outside it.
//
// Mounts made read-only here cannot be made writable from inside the
// session: its Landlock domain refuses every mount, and without one (an
// --allow-userns session) the kernel locks the read-only flag of the
// mounts it copies into a mount namespace of a user namespace.
func makeReadOnly(r ReadOnly, uid uint32) error {
	var paths []roPath
	for _, set := range []struct {
		names   []string
		machine bool
	}{{r.Machine, true}, {r.Session, false}} {
		for _, n := range set.names {
			if err := CheckReadOnlyPath(n); err != nil {
				return fmt.Errorf("sandbox: %w", err)
			}
			p, err := resolveReadOnly(n, set.machine, uid)
			if err != nil {
				return err
			}
			if p.real != "" {
				paths = append(paths, p)
			}
		}
	}
	// Shallow first: a path below one already read-only is covered by it
	// (and its directories can no longer be renamed).
	slices.SortFunc(paths, func(a, b roPath) int { return len(a.real) - len(b.real) })
	var done []string
	for _, p := range paths {
		if slices.ContainsFunc(done, func(d string) bool { return Below(p.real, d) }) {
			continue
		}
		if err := readOnlyMount(p, uid); err != nil {
			return err
		}
		done = append(done, p.real)
	}
	return nil
}

// resolveReadOnly finds name in the session's view. A path that does not
// exist is an error for a session's own path; for the machine's it is
// skipped (real "") when uid cannot create it, after the directories above
// it that uid could rename are held (as for a missing socket name), and
// an error when it could.
func resolveReadOnly(name string, machine bool, uid uint32) (roPath, error) {
	p := roPath{name: name, machine: machine}
	real, err := filepath.EvalSymlinks(name)
	if err == nil {
		p.real = real
		return p, nil
	}
	if errors.Is(err, unix.EACCES) {
		return p, fmt.Errorf("sandbox: read-only path %s: root cannot look it up in the session's view of the file system: %w", name, err)
	}
	if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
		return p, fmt.Errorf("sandbox: read-only path %s: %w", name, err)
	}
	if !machine {
		return p, fmt.Errorf("sandbox: read-only path %s does not exist in the session's view of the file system", name)
	}
	d := filepath.Dir(name)
	var ds unix.Stat_t
	for ; d != "/"; d = filepath.Dir(d) {
		if unix.Stat(d, &ds) == nil {
			break
		}
	}
	if d == "/" {
		if err := unix.Stat("/", &ds); err != nil {
			return p, fmt.Errorf("sandbox: stat /: %w", err)
		}
	}
	if writableBy(ds, uid) {
		return p, fmt.Errorf("sandbox: the daemon's read-only path %s does not exist in the session's view, and the session's user could create it in %s: refusing to start the session (it could plant there what later readers of %s trust)", name, d, name)
	}
	if d != "/" {
		if err := protectPath(d, ds, uid); err != nil {
			return p, fmt.Errorf("sandbox: read-only path %s: hold %s: %w", name, d, err)
		}
	}
	return p, nil
}

// readOnlyMount makes p.real read-only (makeReadOnly). Every step after
// the first lookup goes through descriptors opened without following
// symlinks, so a name swapped meanwhile fails the start rather than
// protect another place.
func readOnlyMount(p roPath, uid uint32) error {
	var st unix.Stat_t
	if err := unix.Lstat(p.real, &st); err != nil {
		return fmt.Errorf("sandbox: read-only path %s: %w", p.name, err)
	}
	// The directories above it, not the path itself: it becomes a mount
	// point below, which holds it.
	if dir := filepath.Dir(p.real); dir != p.real && dir != "/" {
		var ds unix.Stat_t
		if err := unix.Lstat(dir, &ds); err != nil {
			return fmt.Errorf("sandbox: read-only path %s: %w", p.name, err)
		}
		if err := protectPath(dir, ds, uid); err != nil {
			return fmt.Errorf("sandbox: read-only path %s: %w", p.name, err)
		}
	}
	fd, err := openNoSymlinks(p.real)
	if err != nil {
		return fmt.Errorf("sandbox: read-only path %s: %w", p.name, err)
	}
	defer unix.Close(fd)
	if !mountRoot(p.real) {
		tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
		if err != nil {
			return fmt.Errorf("sandbox: read-only path %s: clone its mounts: %w", p.name, err)
		}
		err = unix.MoveMount(tree, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
		unix.Close(tree)
		if err != nil {
			return fmt.Errorf("sandbox: read-only path %s: bind it onto itself: %w", p.name, err)
		}
	}
	// Looked up again: the descriptor above names the place under the new
	// mount.
	top, err := openNoSymlinks(p.real)
	if err != nil {
		return fmt.Errorf("sandbox: read-only path %s: %w", p.name, err)
	}
	defer unix.Close(top)
	var ts unix.Stat_t
	if err := unix.Fstat(top, &ts); err != nil {
		return fmt.Errorf("sandbox: read-only path %s: %w", p.name, err)
	}
	if ts.Dev != st.Dev || ts.Ino != st.Ino {
		return fmt.Errorf("sandbox: read-only path %s changed while the session started", p.name)
	}
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(top, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, ro); err != nil {
		return fmt.Errorf("sandbox: make %s read-only (mount_setattr, Linux 5.12): %w", p.name, err)
	}
	return nil
}

// openNoSymlinks opens path as an O_PATH descriptor, refusing symlinks
// anywhere on it (openat2, Linux 5.6).
func openNoSymlinks(path string) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
	return fd, nil
}
