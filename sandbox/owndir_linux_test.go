// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The own directory is held only below directories no one but root can
// write: below a sticky, world-writable one (/tmp), or a directory a user
// owns, its path could be replaced before the mount. A bad path is refused
// before anything is made.
func TestMountOwnDirRefusesWritableParents(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, dir := range []string{"relative/own", "/run/../run/x", "/", "/x"} {
		if err := mountOwnDir(dir, 65534, 65534); err == nil || !strings.Contains(err.Error(), "clean absolute") {
			t.Errorf("mountOwnDir(%q) = %v, want a refusal of the path", dir, err)
		}
	}
	base := t.TempDir()
	userOwned := filepath.Join(base, "user")
	if err := os.Mkdir(userOwned, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(userOwned, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join("/tmp", "sluice-own-test", "1"), filepath.Join(userOwned, "1")} {
		if err := mountOwnDir(dir, 65534, 65534); err == nil || !strings.Contains(err.Error(), "only root can write") {
			t.Errorf("mountOwnDir(%q) = %v, want a refusal of its parent", dir, err)
		}
		if _, err := os.Lstat(dir); err == nil {
			t.Errorf("mountOwnDir(%q) made it although it refused", dir)
		}
	}
	if _, err := os.Lstat(filepath.Join("/tmp", "sluice-own-test")); err == nil {
		os.RemoveAll(filepath.Join("/tmp", "sluice-own-test"))
		t.Errorf("mountOwnDir made a directory in /tmp although it refused")
	}
}

// In a mount namespace of its own, the own directory is a nosymfollow tmpfs
// of the user's, mode 0700, and the directory under it is root's; removing
// it afterwards leaves nothing.
func TestMountOwnDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	// Below /run, which only root can write (t.TempDir is below /tmp).
	root, err := os.MkdirTemp("/run", "sluice-owntest-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	dir := filepath.Join(root, "own", "42")
	errc := make(chan error, 1)
	var st unix.Stat_t
	var sfs unix.Statfs_t
	go func() {
		runtime.LockOSThread() // thrown away with its namespace: never unlocked
		if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- err
			return
		}
		if err := mountOwnDir(dir, 65534, 65533); err != nil {
			errc <- err
			return
		}
		if err := unix.Stat(dir, &st); err != nil {
			errc <- err
			return
		}
		errc <- unix.Statfs(dir, &sfs)
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if st.Uid != 65534 || st.Gid != 65533 || st.Mode&0o7777 != 0o700 {
		t.Errorf("own directory: uid %d gid %d mode %o, want 65534 65533 0700", st.Uid, st.Gid, st.Mode&0o7777)
	}
	if sfs.Type != unix.TMPFS_MAGIC || sfs.Flags&stNoSymFollow == 0 || sfs.Flags&unix.ST_NOSUID == 0 || sfs.Flags&unix.ST_NODEV == 0 {
		t.Errorf("own directory: fs type %x flags %x, want tmpfs, nosymfollow, nosuid, nodev", sfs.Type, sfs.Flags)
	}
	// Outside the namespace it is the empty directory of root's.
	var outside unix.Stat_t
	if err := unix.Lstat(dir, &outside); err != nil || outside.Uid != 0 {
		t.Fatalf("outside, %s: uid %d, %v", dir, outside.Uid, err)
	}
	if err := RemoveOwnDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := RemoveOwnDir(dir); err != nil {
		t.Errorf("removing it twice: %v", err)
	}
}

// stNoSymFollow is statfs's ST_NOSYMFOLLOW (linux/statfs.h), which x/sys
// does not name.
const stNoSymFollow = 0x2000
