// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// staging is where Enter briefly mounts the tmpfs that holds the empty file
// and directory laid over hidden paths. /proc is used because it is the
// one directory every mount namespace has and that is covered again
// (by the private /proc, or by uncovering the host's) before the command
// runs.
const staging = "/proc"

// Enter gives the calling thread a mount namespace of its own, set up for
// spec: a copy of from's (a pidfd; nil: the calling thread's), with
// every mount a slave of the original (host mounts keep arriving, the
// session's never leave), the hidden paths covered by an empty read-only
// file or directory, the read-only paths made read-only (ReadOnly), and,
// with spec.Processes, a private /proc mounted hidepid=invisible. A child
// the thread then clones is born in it.
//
// Enter changes per-thread state it cannot undo: call it only on a locked
// OS thread that is thrown away afterwards (cgroups.Session.StartWith does
// this), as root. It reports each path it hid to hid, when not nil.
func Enter(spec Spec, from *os.File, hid func(path string)) error {
	// setns(CLONE_NEWNS) and unshare(CLONE_NEWNS) need a thread that does
	// not share its root and working directory with the runtime's others.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("sandbox: unshare(CLONE_FS): %w", err)
	}
	// The working directory a child inherits is re-entered by path once
	// the mounts are made: kept as it is, it could sit inside a hidden
	// directory and keep its contents reachable. (With from, the caller
	// names the directory: the thread's own means nothing there.)
	cwd := ""
	if from == nil {
		var err error
		if cwd, err = unix.Getwd(); err != nil {
			return fmt.Errorf("sandbox: working directory: %w", err)
		}
	}
	if from != nil {
		if err := setnsMount(from); err != nil {
			return err
		}
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("sandbox: new mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("sandbox: make the session's mounts slaves: %w", err)
	}
	home := spec.Home
	if home == "" {
		home = homeOf(spec.UID)
	}
	globs, shown := spec.Hidden.Expand(home)
	if len(globs) > 0 {
		if err := hide(globs, shown, hid, spec.OnNote); err != nil {
			return err
		}
	}
	// The own directory's mount point is made before the read-only paths
	// are (one of them may hold it), and its tmpfs mounted after them, so
	// that it stays writable whatever they cover.
	if spec.OwnDir != "" {
		if err := makeOwnDir(spec.OwnDir); err != nil {
			return err
		}
	}
	if err := makeReadOnly(spec.ReadOnly, spec.UID); err != nil {
		return err
	}
	if spec.DockerSocket != "" {
		if err := bindDockerSocket(spec.DockerSocket, spec.DockerNames); err != nil {
			return err
		}
	}
	if err := pinSockets(spec.Sockets, spec.UID, spec.OnSocket); err != nil {
		return err
	}
	if spec.OwnDir != "" {
		if err := mountOwnDirOn(spec.OwnDir, spec.UID, spec.GID); err != nil {
			return err
		}
	}
	if spec.Processes {
		if err := mountProc(spec.PidNS); err != nil {
			return fmt.Errorf("sandbox: mount the session's /proc: %w", err)
		}
	}
	if cwd != "" {
		if err := unix.Chdir(cwd); err != nil {
			return fmt.Errorf("sandbox: re-enter the working directory %s: %w", cwd, err)
		}
	}
	return nil
}

// mountProc mounts the session's /proc, hidepid=invisible, for the PID
// namespace pidns (nil: the one this thread's children start in, which
// is also the thread's own).
func mountProc(pidns *os.File) error {
	if pidns == nil {
		return unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=invisible")
	}
	// A proc instance shows the mounter's PID namespace unless told
	// otherwise: pidns= (Linux 6.17) names the command's.
	fs, err := unix.Fsopen("proc", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen proc: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "hidepid", "invisible"); err != nil {
		return fmt.Errorf("proc hidepid=invisible: %w", err)
	}
	if err := unix.FsconfigSetFd(fs, "pidns", int(pidns.Fd())); err != nil {
		return fmt.Errorf("proc pidns= (Linux 6.17) for the caller's PID namespace: %w", err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("create proc: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return fmt.Errorf("fsmount proc: %w", err)
	}
	defer unix.Close(mnt)
	if err := unix.MoveMount(mnt, "", unix.AT_FDCWD, "/proc", unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move proc onto /proc: %w", err)
	}
	return nil
}

// homeOf is uid's home directory, or "" for a uid without an account.
// It reads the account database of the calling thread's mount namespace.
func homeOf(uid uint32) string {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return ""
	}
	return u.HomeDir
}

// pidfdGetMntNamespace is PIDFD_GET_MNT_NAMESPACE, _IO(0xFF, 3) (Linux
// 6.11); NS_GET_USERNS, _IO(0xb7, 1), lends it the architecture's _IOC_NONE
// bits.
const pidfdGetMntNamespace = (unix.NS_GET_USERNS &^ 0xffff) | 0xff03

// setnsMount joins the mount namespace of the process pidfd refers to, but
// only one that belongs to this process's user namespace. A mount namespace
// of another user namespace (unshare -rm, a rootless container) holds mounts
// its unprivileged owner made: over the sluice binary the session's shim is
// run from, or over /etc/nsswitch.conf, whose modules root would load here
// to find the user's home. Those are refused.
func setnsMount(pidfd *os.File) error {
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return fmt.Errorf("sandbox: caller's pidfd: %w", err)
	}
	var ns int
	var nerr error
	if err := rc.Control(func(fd uintptr) { ns, nerr = callerMountNS(int(fd)) }); err != nil {
		return fmt.Errorf("sandbox: caller's pidfd: %w", err)
	}
	if nerr != nil {
		return nerr
	}
	defer unix.Close(ns)
	owner, err := unix.IoctlRetInt(ns, unix.NS_GET_USERNS)
	if err != nil {
		return fmt.Errorf("sandbox: the user namespace of the caller's mount namespace: %w", err)
	}
	var theirs, mine unix.Stat_t
	err = unix.Fstat(owner, &theirs)
	unix.Close(owner)
	if err != nil {
		return fmt.Errorf("sandbox: the user namespace of the caller's mount namespace: %w", err)
	}
	if err := unix.Stat("/proc/thread-self/ns/user", &mine); err != nil {
		return fmt.Errorf("sandbox: this process's user namespace: %w", err)
	}
	if theirs.Dev != mine.Dev || theirs.Ino != mine.Ino {
		return fmt.Errorf("sandbox: the caller's mount namespace belongs to another user namespace (unshare -r, a rootless container): its mounts are the caller's own, and a session is not built from them; call from a mount namespace root made")
	}
	if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("sandbox: enter the caller's mount namespace: %w (it takes CAP_SYS_ADMIN and CAP_SYS_CHROOT: a systemd unit's CapabilityBoundingSet= must keep both)", err)
		}
		return fmt.Errorf("sandbox: enter the caller's mount namespace: %w", err)
	}
	return nil
}

// callerMountNS opens the mount namespace of the process pidfd refers to:
// through the pidfd itself where the kernel can (6.11), else through
// /proc/PID/ns/mnt, confirmed afterwards to be the pidfd's process (a pid
// can be reused; a pidfd cannot).
func callerMountNS(pidfd int) (int, error) {
	ns, err := unix.IoctlRetInt(pidfd, pidfdGetMntNamespace)
	if err == nil {
		return ns, nil
	}
	pid, err := pidOfPidfd(pidfd)
	if err != nil {
		return -1, err
	}
	ns, err = unix.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("sandbox: the caller's mount namespace: %w", err)
	}
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		unix.Close(ns)
		return -1, fmt.Errorf("sandbox: the caller exited while its mount namespace was opened: %w", err)
	}
	return ns, nil
}

// pidOfPidfd reads the "Pid:" line of the pidfd's fdinfo.
func pidOfPidfd(pidfd int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/thread-self/fdinfo/%d", pidfd))
	if err != nil {
		return 0, fmt.Errorf("sandbox: caller's pidfd: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || pid <= 0 {
				return 0, fmt.Errorf("sandbox: the caller is gone or in another pid namespace (pidfd says %q)", strings.TrimSpace(v))
			}
			return pid, nil
		}
	}
	return 0, fmt.Errorf("sandbox: no Pid in the caller's pidfd")
}

// target is a hidden path, opened (symlinks followed: the secret is where
// the link points) before anything is mounted.
type target struct {
	path string
	fd   int
	dir  bool
}

// hide covers every existing path the globs match. All targets are opened
// first, then the staging tmpfs is mounted, cloned over each, and
// detached again.
func hide(globs []Glob, shown []string, hid, note func(string)) error {
	targets, err := openTargets(globs, shown)
	var mounts []mount
	if err == nil && len(targets) > 0 {
		mounts, err = threadMounts()
	}
	if err == nil && len(targets) > 0 {
		seen := map[string]bool{}
		for _, t := range targets {
			seen[t.path] = true
		}
		links, notes := findLinks(targets, mounts, seen, newLinkBudget())
		targets = append(targets, links...)
		for _, n := range notes {
			if note != nil {
				note(n)
			}
		}
		targets = append(targets, openAliases(targets, mounts)...)
	}
	defer func() {
		for _, t := range targets {
			unix.Close(t.fd)
		}
	}()
	if err != nil || len(targets) == 0 {
		return err
	}
	if err := unix.Mount("sluice-hidden", staging, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=16k,nr_inodes=8"); err != nil {
		return fmt.Errorf("sandbox: mount the staging tmpfs: %w", err)
	}
	err = cover(targets, hid)
	if uerr := unix.Unmount(staging, unix.MNT_DETACH); uerr != nil && err == nil {
		err = fmt.Errorf("sandbox: unmount the staging tmpfs: %w", uerr)
	}
	return err
}

func openTargets(globs []Glob, shown []string) ([]target, error) {
	var targets []target
	seen := map[string]bool{}
	for _, g := range globs {
		matches, err := filepath.Glob(g.Pattern)
		if err != nil {
			return targets, fmt.Errorf("sandbox: hidden path %s: %w", g.Pattern, err)
		}
		for _, m := range matches {
			if seen[m] || (g.Exemptable && Shows(m, shown)) {
				continue
			}
			fd, err := unix.Open(m, unix.O_PATH|unix.O_CLOEXEC, 0)
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
				continue // a dangling link: nothing to hide behind it
			}
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				// Root cannot reach it (an NFS home with root_squash):
				// Glob skips what it cannot read the same way, and a
				// session is not refused for it (docs/design.md).
				continue
			}
			if err != nil {
				return targets, fmt.Errorf("sandbox: hidden path %s: %w", m, err)
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				unix.Close(fd)
				return targets, fmt.Errorf("sandbox: hidden path %s: %w", m, err)
			}
			seen[m] = true
			targets = append(targets, target{path: m, fd: fd, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
		}
	}
	return targets, nil
}

// openAliases opens the other paths at which each target's file is
// reachable through another mount of its file system (aliases.go), in
// this thread's mount namespace: the thread has one of its own, so its
// table is /proc/thread-self's, not /proc/self's. Only a path that is the
// same file (device and inode) is kept; the names are the aliases', so
// the session's notice says where the file was hidden. Hard links, other
// names of the file, are found by findLinks (links_linux.go).
func openAliases(targets []target, mounts []mount) []target {
	var out []target
	seen := map[string]bool{}
	for _, t := range targets {
		seen[t.path] = true
	}
	for _, t := range targets {
		var stx unix.Statx_t
		if err := unix.Statx(t.fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_MNT_ID, &stx); err != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
			continue // no mount id (a kernel before 5.8): the named path only
		}
		real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", t.fd))
		if err != nil || !filepath.IsAbs(real) {
			continue
		}
		for _, alias := range aliasPaths(mounts, int(stx.Mnt_id), real) {
			if seen[alias] {
				continue
			}
			fd, err := unix.Open(alias, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue // not reachable there (stacked over, or not searchable)
			}
			var a unix.Statx_t
			if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO, &a); err != nil ||
				a.Ino != stx.Ino || a.Dev_major != stx.Dev_major || a.Dev_minor != stx.Dev_minor {
				unix.Close(fd)
				continue
			}
			seen[alias] = true
			out = append(out, target{path: alias, fd: fd, dir: t.dir})
		}
	}
	return out
}

// threadMounts reads this thread's mount table: the thread has a mount
// namespace of its own, so its table is /proc/thread-self's, not
// /proc/self's.
func threadMounts() ([]mount, error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("sandbox: hidden paths: %w", err)
	}
	defer f.Close()
	mounts, err := parseMounts(f)
	if err != nil {
		return nil, fmt.Errorf("sandbox: hidden paths: %w", err)
	}
	return mounts, nil
}

// cover lays a read-only clone of the staging file or directory over each
// target, through its descriptor, so no path is resolved twice.
func cover(targets []target, hid func(string)) error {
	file, dir := filepath.Join(staging, "file"), filepath.Join(staging, "dir")
	f, err := unix.Open(file, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
	if err != nil {
		return fmt.Errorf("sandbox: staging file: %w", err)
	}
	unix.Close(f)
	if err := unix.Mkdir(dir, 0o555); err != nil {
		return fmt.Errorf("sandbox: staging directory: %w", err)
	}
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
	for _, t := range targets {
		src := file
		if t.dir {
			src = dir
		}
		tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("sandbox: hide %s: clone %s: %w", t.path, src, err)
		}
		err = unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, ro)
		if err == nil {
			err = unix.MoveMount(tree, "", t.fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
		}
		unix.Close(tree)
		if err != nil {
			return fmt.Errorf("sandbox: hide %s: %w", t.path, err)
		}
		if hid != nil {
			hid(t.path)
		}
	}
	return nil
}

// mountOwnDir makes dir and its parent (root-owned, 0755; every directory
// above must be root's and writable by no one else, so no one but root can rename or replace any
// of them) and mounts a fresh tmpfs on it in the calling thread's mount
// namespace: owned by uid:gid, mode 0700, nosuid, nodev and nosymfollow.
// On it the session's processes can make sockets, files and directories,
// but a symlink there is never followed (ELOOP), and nothing from another
// file system can be linked or renamed into it (EXDEV): a name below dir
// leads to a socket made in it by the session. The mount exists only in
// the session's namespace; the directory under it stays, empty, until
// the session's owner removes it (RemoveOwnDir).
func mountOwnDir(dir string, uid, gid uint32) error {
	if err := makeOwnDir(dir); err != nil {
		return err
	}
	return mountOwnDirOn(dir, uid, gid)
}

// makeOwnDir makes the own directory dir and its parent (mountOwnDir), as
// root's directories below directories only root can write.
func makeOwnDir(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || filepath.Dir(dir) == "/" {
		return fmt.Errorf("sandbox: own directory %q: not a clean absolute path two levels below /", dir)
	}
	// Nothing is made below a directory someone else could write (where
	// a name could be a symlink planted to lead root's mkdir elsewhere).
	parent := filepath.Dir(dir)
	if err := rootOnly(filepath.Dir(parent)); err != nil {
		return err
	}
	if err := unix.Mkdir(parent, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("sandbox: make %s: %w", parent, err)
	}
	if err := rootOnly(parent); err != nil {
		return err
	}
	// The user must be able to pass through it (a umask of 077 made it
	// 0700).
	if err := unix.Chmod(parent, 0o755); err != nil {
		return fmt.Errorf("sandbox: %s: %w", parent, err)
	}
	if err := unix.Mkdir(dir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("sandbox: make the session's own directory %s: %w", dir, err)
	}
	return nil
}

// mountOwnDirOn mounts the own directory's tmpfs on dir, which makeOwnDir
// made (mountOwnDir).
func mountOwnDirOn(dir string, uid, gid uint32) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("sandbox: the session's own directory %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 {
		return fmt.Errorf("sandbox: %s is not a directory of root's: refusing to mount the session's own directory there", dir)
	}
	opts := fmt.Sprintf("mode=0700,uid=%d,gid=%d", uid, gid)
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOSYMFOLLOW)
	if err := unix.Mount("sluice-own", dir, "tmpfs", flags, opts); err != nil {
		return fmt.Errorf("sandbox: mount the session's own directory on %s (tmpfs, nosymfollow needs Linux 5.10): %w", dir, err)
	}
	return nil
}

// rootOnly checks that dir and every directory above it are root's
// directories that no one else can write (a sticky directory is not
// enough: its owner-less entries can still be made by anyone first).
func rootOnly(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			return fmt.Errorf("sandbox: %s: %w", d, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 || st.Mode&0o022 != 0 {
			return fmt.Errorf("sandbox: %s is not a root-owned directory that only root can write: the session's own directory cannot be held below it", d)
		}
		if d == "/" {
			return nil
		}
	}
}

// RemoveOwnDir removes the empty directory a session's own directory was
// mounted on, once the session is over (in the mount namespace of the
// caller, where the mount never was). A directory that is gone is fine.
func RemoveOwnDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("sandbox: remove %s: %w", dir, err)
	}
	return nil
}
