// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// listenAPI listens on path with the socket file owned by root:gid and
// of mode: it binds a temporary name beside path, with the group and
// mode set before the file has its name, and renames it over path, so
// that no caller ever finds the name with wider permissions, and a stale
// socket is replaced in one step. It returns the file's identity, so that
// Shutdown removes only its own socket.
func listenAPI(path string, gid uint32, mode os.FileMode) (*net.UnixListener, unix.Stat_t, error) {
	var st unix.Stat_t
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".sluice-%d.sock", os.Getpid()))
	_ = os.Remove(tmp)
	ul, err := bindAs(tmp, gid)
	if err != nil {
		return nil, st, fmt.Errorf("listen on %s: %w", path, err)
	}
	ul.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, unix.Stat_t, error) {
		ul.Close()
		_ = os.Remove(tmp)
		return nil, st, err
	}
	// Through a descriptor of the file itself, never by following a name
	// that someone who can write the directory could have made a symlink
	// (root would chmod whatever it led to).
	fd, err := unix.Open(tmp, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("open %s: %w", tmp, err))
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(fmt.Errorf("stat %s: %w", tmp, err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Uid != 0 {
		return fail(fmt.Errorf("%s is not the socket the daemon just made (replaced meanwhile?)", tmp))
	}
	if st.Gid != gid {
		// A set-group-id directory gave the file its own group.
		if err := unix.Fchownat(fd, "", 0, int(gid), unix.AT_EMPTY_PATH); err != nil {
			return fail(fmt.Errorf("give %s to group %d: %w", tmp, gid, err))
		}
	}
	// Before anyone can connect (the daemon's umask leaves the file no
	// wider than 0755, and connect needs write permission). chmod of an
	// O_PATH descriptor's /proc link changes the file it was opened on.
	if err := unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), uint32(mode)); err != nil {
		return fail(fmt.Errorf("chmod %s: %w", tmp, err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("rename %s to %s: %w", tmp, path, err))
	}
	var now unix.Stat_t
	if err := unix.Lstat(path, &now); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		ul.Close()
		return nil, st, fmt.Errorf("%s is not the socket the daemon just made (replaced meanwhile?)", path)
	}
	return ul, st, nil
}

// socketDirWarning says what is wrong with the socket's directory, or "":
// whoever can write it can replace the socket by one of its own, which
// callers would then talk to.
func socketDirWarning(path string) string {
	dir := filepath.Dir(path)
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return ""
	}
	if st.Uid != 0 || (st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0) {
		return fmt.Sprintf("the socket's directory %s is not root's alone (uid %d, mode %#o): whoever can write it can replace the API socket by one of its own", dir, st.Uid, st.Mode&0o7777)
	}
	return ""
}

// bindAs binds and listens on path from a thread whose file-system gid is
// gid, so that the socket file is born in that group: changing its group
// afterwards would take CAP_CHOWN, which the packaged unit does not give
// the daemon (setfsgid takes CAP_SETGID, which it does). The thread is
// thrown away afterwards rather than trusted to have its gid restored.
func bindAs(path string, gid uint32) (*net.UnixListener, error) {
	type result struct {
		ul  *net.UnixListener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with its fsgid
		if err := unix.Setfsgid(int(gid)); err != nil {
			done <- result{err: fmt.Errorf("setfsgid %d: %w", gid, err)}
			return
		}
		if got, _ := unix.SetfsgidRetGid(-1); got != int(gid) {
			done <- result{err: fmt.Errorf("setfsgid %d: the thread's file-system gid is %d", gid, got)}
			return
		}
		ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		done <- result{ul, err}
	}()
	r := <-done
	return r.ul, r.err
}

// removeSocket removes the API socket at path if it is still the file
// listenAPI made (st): a daemon started meanwhile has its own there.
func removeSocket(path string, st unix.Stat_t) {
	var now unix.Stat_t
	if err := unix.Lstat(path, &now); err != nil {
		return
	}
	if now.Dev == st.Dev && now.Ino == st.Ino {
		_ = os.Remove(path) // best effort: the next daemon replaces it anyway
	}
}
