// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// EngineAccess is Machine.EngineAccess on Linux: nil when c's user could
// connect to the unix socket at path itself, by the permission bits the
// kernel would apply to it (search on every directory on the way, write
// on the socket), read from the daemon's view of the file system. An
// access check in this process would apply root's rights instead, and a
// connect as the caller would need a process with its credentials.
func EngineAccess(path string, c Caller) error {
	if c.UID == 0 {
		return nil
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("the engine's socket %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(resolved, &st); err != nil {
		return fmt.Errorf("the engine's socket %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("%s is not a unix socket", path)
	}
	if !permits(&st, c, 0o2) {
		return fmt.Errorf("user %d may not connect to %s (%s %d:%d)", c.UID, path, os.FileMode(st.Mode&0o777), st.Uid, st.Gid)
	}
	// The broker dials the name again for every request, as root: a name
	// the user could change after this check (a socket of its own, then a
	// link to the engine in its place) would lend it root's access.
	for _, p := range []string{path, resolved} {
		if err := rootHeld(p, c); err != nil {
			return fmt.Errorf("the engine's socket %s: %w", path, err)
		}
	}
	// Every directory above it must let the user search it.
	for dir := filepath.Dir(resolved); ; dir = filepath.Dir(dir) {
		var ds unix.Stat_t
		if err := unix.Stat(dir, &ds); err != nil {
			return fmt.Errorf("the engine's socket %s: %w", path, err)
		}
		if !permits(&ds, c, 0o1) {
			return fmt.Errorf("user %d may not reach %s: %s is %s %d:%d", c.UID, path, dir, os.FileMode(ds.Mode&0o777), ds.Uid, ds.Gid)
		}
		if dir == "/" || !strings.HasPrefix(dir, "/") {
			return nil
		}
	}
}

// permits applies the permission class of st that c falls in (owner,
// group, other: the first that matches decides, as in the kernel) to the
// access bits want (0o2 write, 0o1 search).
func permits(st *unix.Stat_t, c Caller, want uint32) bool {
	mode := st.Mode & 0o777
	switch {
	case st.Uid == c.UID:
		return (mode>>6)&want == want
	case st.Gid == c.GID || slices.Contains(c.Groups, st.Gid):
		return (mode>>3)&want == want
	default:
		return mode&want == want
	}
}

// rootHeld is nil when no part of path can be changed by c: every
// component (links and the socket too) is root's, and no directory on
// the way lets c replace its entry (writable by c only with the sticky
// bit, whose entries only their owner, root, may rename).
func rootHeld(path string, c Caller) error {
	cur := "/"
	for _, name := range strings.Split(strings.TrimPrefix(filepath.Clean(path), "/"), "/") {
		if name == "" {
			continue
		}
		next := filepath.Join(cur, name)
		var ds, ns unix.Stat_t
		if err := unix.Stat(cur, &ds); err != nil {
			return err
		}
		if err := unix.Lstat(next, &ns); err != nil {
			return err
		}
		if ns.Uid != 0 {
			return fmt.Errorf("%s belongs to uid %d, not root", next, ns.Uid)
		}
		if permits(&ds, c, 0o2) && ds.Mode&unix.S_ISVTX == 0 {
			return fmt.Errorf("user %d may replace %s (%s is writable to it)", c.UID, next, cur)
		}
		cur = next
	}
	return nil
}
