// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/cgroups"
)

// checkCommand says why path (relative to dir, if relative) cannot be
// executed in dir by user, or nil. Every session's command starts through
// the socket-family shim (package sandbox/shim), which is sluice's own
// binary: spawning it succeeds whatever path names, and a command that
// cannot run would fail only inside the shim, after the create request was
// answered 200. So the service looks first, as the user would.
//
// It looks as the user: on a thread of its own whose file-system ids and
// groups are the user's (setfsuid drops the daemon's DAC-override
// capabilities on that thread), so that a caller learns nothing about
// paths it could not see itself. The thread is never handed back to the
// Go runtime; it ends with the check. The answer can be stale by the time
// the command starts: it spares callers a late failure and checks nothing
// that matters to confinement.
func checkCommand(user cgroups.SpawnOptions, dir, path string) error {
	if dir != "" && !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := becomeFS(user); err != nil {
			errc <- fmt.Errorf("check the command as uid %d: %w", user.UID, err)
			return
		}
		errc <- lookAsUser(dir, path)
	}()
	return <-errc
}

// becomeFS gives the calling thread user's groups and file-system ids.
func becomeFS(user cgroups.SpawnOptions) error {
	groups := make([]int, len(user.Groups))
	for i, g := range user.Groups {
		groups[i] = int(g)
	}
	if err := unix.Setgroups(groups); err != nil {
		return err
	}
	if err := unix.Setfsgid(int(user.GID)); err != nil {
		return err
	}
	if err := unix.Setfsuid(int(user.UID)); err != nil {
		return err
	}
	// setfsuid does not fail; it says what it did by the id it returns
	// next time.
	if got, _ := unix.SetfsuidRetUid(-1); got != int(user.UID) {
		return fmt.Errorf("setfsuid: file-system uid is %d", got)
	}
	return nil
}

// lookAsUser is checkCommand's look, on a thread that has become the user.
func lookAsUser(dir, path string) error {
	var st unix.Stat_t
	if dir != "" {
		if err := unix.Stat(dir, &st); err != nil {
			return &fs.PathError{Op: "chdir", Path: dir, Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return &fs.PathError{Op: "chdir", Path: dir, Err: unix.ENOTDIR}
		}
		if err := unix.Faccessat2(unix.AT_FDCWD, dir, unix.X_OK, unix.AT_EACCESS); err != nil {
			return &fs.PathError{Op: "chdir", Path: dir, Err: err}
		}
	}
	if err := unix.Stat(path, &st); err != nil {
		return &fs.PathError{Op: "exec", Path: path, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return &fs.PathError{Op: "exec", Path: path, Err: errors.New("is a directory, not a program")}
	default:
		return &fs.PathError{Op: "exec", Path: path, Err: errors.New("not a regular file")}
	}
	// X_OK as the thread's ids (AT_EACCESS): the mode bits, ACLs and a
	// noexec mount, as exec itself would judge them.
	if err := unix.Faccessat2(unix.AT_FDCWD, path, unix.X_OK, unix.AT_EACCESS); err != nil {
		return &fs.PathError{Op: "exec", Path: path, Err: err}
	}
	return nil
}
