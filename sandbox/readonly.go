// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// MaxReadOnlyPaths bounds the read-only paths of one session (the
// machine's and its own together): each is a few mounts in the session's
// namespace, made before its command starts.
const MaxReadOnlyPaths = 64

// ReadOnly are the paths a session's mount namespace makes read-only, each
// with everything below it: a recursive bind of the path onto itself whose
// every mount is read-only, so nothing in the session can write, create,
// rename, unlink or change the attributes of anything there (EROFS), and
// the mounts cannot be made writable again, not even from a user
// namespace (the kernel locks the read-only flag of mounts it copies into
// one). Machine are the daemon's (--read-only, "read_only_paths" in its
// configuration), which no session can remove; Session a session's own
// additions.
//
// A session's own path must exist when the session starts: a path it
// names and that is not there is a mistake it hears of. A machine path
// is the same for every session, whose views of the file system differ
// (a container's, a systemd unit's), so a missing one is skipped where
// the session's user could not create it (nothing of the session's can
// appear there), and refuses the session where it could: it could plant
// there what later readers of the path trust.
type ReadOnly struct {
	Machine []string
	Session []string
}

// CheckReadOnlyPath says why p cannot be a read-only path, or nil: it
// must be absolute and clean (no "..", ".", "//" or trailing "/"), the
// name of one place that does not depend on the working directory.
func CheckReadOnlyPath(p string) error {
	if p == "" {
		return fmt.Errorf("read-only path: empty")
	}
	if strings.ContainsRune(p, 0) {
		return fmt.Errorf("read-only path %q: contains a NUL byte", p)
	}
	if !filepath.IsAbs(p) {
		return fmt.Errorf("read-only path %q: not an absolute path", p)
	}
	if c := filepath.Clean(p); c != p {
		return fmt.Errorf("read-only path %q: not a clean path (did you mean %q?)", p, c)
	}
	return nil
}

// ReadOnlyPaths checks the machine's and a session's read-only paths and
// combines them, without duplicates; nothing is changed when one is bad.
func ReadOnlyPaths(machine, session []string) (ReadOnly, error) {
	var r ReadOnly
	for _, p := range machine {
		if err := CheckReadOnlyPath(p); err != nil {
			return ReadOnly{}, err
		}
		if !slices.Contains(r.Machine, p) {
			r.Machine = append(r.Machine, p)
		}
	}
	for _, p := range session {
		if err := CheckReadOnlyPath(p); err != nil {
			return ReadOnly{}, err
		}
		if !slices.Contains(r.Machine, p) && !slices.Contains(r.Session, p) {
			r.Session = append(r.Session, p)
		}
	}
	if n := len(r.Machine) + len(r.Session); n > MaxReadOnlyPaths {
		return ReadOnly{}, fmt.Errorf("read-only paths: %d, at most %d", n, MaxReadOnlyPaths)
	}
	return r, nil
}

// Empty reports whether r makes nothing read-only.
func (r ReadOnly) Empty() bool { return len(r.Machine) == 0 && len(r.Session) == 0 }

// Below reports whether path is p or below it (both absolute and clean).
func Below(path, p string) bool {
	return path == p || p == "/" || strings.HasPrefix(path, p+"/")
}
