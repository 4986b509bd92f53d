// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The datapath judges a unix socket by the name a program passes to
// connect(), and the kernel follows that name afterwards: a session that
// could replace an allowed name, or a directory on its path, could lead the
// name to another socket (a relay outside the session). So, in the
// session's mount namespace, each allowed socket name the session could
// replace (its directory is writable by the session's user) is bound onto
// itself, and so is each directory on its path the user could rename: a
// mount point cannot be unlinked, renamed or renamed over (EBUSY), in the
// namespace that has it. The session's Landlock domain refuses every mount
// (and without it, user namespaces are refused: RefuseUserNamespaces), so
// it cannot undo or cover these binds.

// socketFate is what pinSockets decided for one name.
type socketFate struct {
	ok  bool   // the name leads to the socket it led to when the session started
	why string // why not
}

// pinSockets protects names (allowed unix socket paths) for a session run
// as uid, and reports each one's fate. A name that does not exist, is not
// a socket, or is a symlink the user could replace is not protected: the
// caller decides whether to allow it anyway.
func pinSockets(names []string, uid uint32, report func(name string, ok bool, why string)) error {
	for _, n := range names {
		if !filepath.IsAbs(n) {
			continue // abstract names ("@x") have no file to swap
		}
		f, err := pinSocket(filepath.Clean(n), uid)
		if err != nil {
			return fmt.Errorf("sandbox: protect the unix socket name %s: %w", n, err)
		}
		if report != nil {
			report(n, f.ok, f.why)
		}
	}
	return nil
}

func pinSocket(name string, uid uint32) (socketFate, error) {
	var st unix.Stat_t
	err := unix.Lstat(name, &st)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return holdMissing(name, uid)
	}
	if errors.Is(err, unix.EACCES) {
		return socketFate{why: "root cannot look it up"}, nil
	}
	if err != nil {
		return socketFate{}, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		// A symlink cannot be a mount point: it holds only where the
		// user can replace neither it nor a directory above it. Its
		// target is then protected like a name of its own.
		if replaceable(name, st, uid) || anyRenamable(name, uid) {
			return socketFate{why: "it is a symlink in a directory the session can write; point to the socket itself"}, nil
		}
		target, err := filepath.EvalSymlinks(name)
		if err != nil {
			return socketFate{why: "its symlink leads nowhere"}, nil
		}
		return pinSocket(target, uid)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return socketFate{why: "it is not a socket"}, nil
	}
	if err := protectPath(name, st, uid); err != nil {
		return socketFate{}, err
	}
	return socketFate{ok: true}, nil
}

// holdMissing decides for a name that does not exist (yet): the session
// could create it, as a link to any socket, if it can write the deepest
// directory on its path that exists; then it is not held. Otherwise the
// directories above that one that the user could rename are bound onto
// themselves, and whoever creates the name later (a system service) is
// not the session.
func holdMissing(name string, uid uint32) (socketFate, error) {
	d := filepath.Dir(name)
	var ds unix.Stat_t
	for ; d != "/" && d != "."; d = filepath.Dir(d) {
		if unix.Stat(d, &ds) == nil {
			break
		}
	}
	if d == "/" || d == "." {
		if err := unix.Stat("/", &ds); err != nil {
			return socketFate{}, err
		}
	}
	if writableBy(ds, uid) {
		return socketFate{why: "it does not exist when the session starts, in a directory the session can write: the session could create it as a link to any socket"}, nil
	}
	if d != "/" && d != "." {
		if err := protectPath(d, ds, uid); err != nil {
			return socketFate{}, err
		}
	}
	return socketFate{ok: true}, nil
}

// protectPath binds onto itself each directory above name that uid could
// rename, from the top down, and then name itself if uid could replace
// it; what is already a mount point stays as it is.
func protectPath(name string, st unix.Stat_t, uid uint32) error {
	var dirs []string
	for d := filepath.Dir(name); d != "/" && d != "."; d = filepath.Dir(d) {
		dirs = append(dirs, d)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		var ds unix.Stat_t
		if err := unix.Lstat(dirs[i], &ds); err != nil {
			return err
		}
		if replaceable(dirs[i], ds, uid) {
			if err := bindSelf(dirs[i]); err != nil {
				return err
			}
		}
	}
	if replaceable(name, st, uid) {
		return bindSelf(name)
	}
	return nil
}

// anyRenamable reports whether uid could rename a directory above path.
func anyRenamable(path string, uid uint32) bool {
	for d := filepath.Dir(path); d != "/" && d != "."; d = filepath.Dir(d) {
		var ds unix.Stat_t
		if unix.Lstat(d, &ds) == nil && replaceable(d, ds, uid) && !mountRoot(d) {
			return true
		}
	}
	return false
}

// replaceable reports whether uid could unlink or rename path (whose
// lstat is st), or rename something over it: its directory is writable by
// uid, and not sticky, or sticky and uid owns path or the directory. A
// directory writable by a group counts as writable: sluice does not know
// every group the command runs with.
func replaceable(path string, st unix.Stat_t, uid uint32) bool {
	var ps unix.Stat_t
	if unix.Stat(filepath.Dir(path), &ps) != nil {
		return false
	}
	if !writableBy(ps, uid) {
		return false
	}
	if ps.Mode&unix.S_ISVTX != 0 {
		return st.Uid == uid || ps.Uid == uid
	}
	return true
}

// writableBy reports whether uid may create entries in the directory whose
// stat is ds (group-writable counts, as in replaceable).
func writableBy(ds unix.Stat_t, uid uint32) bool {
	m := ds.Mode
	return (ds.Uid == uid && m&0o200 != 0) || m&0o002 != 0 || (m&0o020 != 0 && ds.Gid != 0)
}

// mountRoot reports whether path is the root of a mount (statx,
// Linux 5.8).
func mountRoot(path string) bool {
	var sx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &sx) != nil {
		return false
	}
	return sx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && sx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}

// bindSelf makes path a mount point of itself (recursively, so the
// mounts below a directory stay), unless it is one already.
func bindSelf(path string) error {
	if mountRoot(path) {
		return nil
	}
	if err := unix.Mount(path, path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s onto itself: %w", path, err)
	}
	return nil
}
