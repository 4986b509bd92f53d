// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// resolveBeneath keeps every lookup inside the cgroup2 mount: no "..", no
// symlinks or /proc magic links, no crossing into another mount.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV

// noOpenat2 is set once the kernel (before 5.6) or a seccomp filter has
// answered ENOSYS, so later opens go straight to the fallback.
var noOpenat2 atomic.Bool

// openBeneath opens rel, a '/'-separated path relative to the cgroup2 mount
// ("" or "." for the mount itself), and checks that the result lives on
// cgroup2. Errors are *os.PathError so errors.Is(err, fs.ErrNotExist) works.
func openBeneath(mount, rel string, flags int) (int, error) {
	if rel == "" {
		rel = "."
	}
	full := path.Join(mount, rel)
	flags |= unix.O_CLOEXEC
	fd, err := openat2Beneath(mount, rel, flags)
	if errors.Is(err, unix.ENOSYS) {
		noOpenat2.Store(true)
		// Without openat2 the best available is refusing a symlink as the last
		// component; names are validated, so the path holds no "..".
		fd, err = unix.Open(full, flags|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: full, Err: err}
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "fstatfs", Path: full, Err: err}
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		unix.Close(fd)
		return -1, &os.PathError{Op: "open", Path: full, Err: fmt.Errorf("not on a cgroup2 filesystem (f_type %#x)", st.Type)}
	}
	return fd, nil
}

func openat2Beneath(mount, rel string, flags int) (int, error) {
	if noOpenat2.Load() {
		return -1, unix.ENOSYS
	}
	dir, err := unix.Open(mount, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dir)
	how := unix.OpenHow{Flags: uint64(flags), Resolve: resolveBeneath}
	// EAGAIN means a concurrent rename or mount raced the lookup; it is
	// worth a few retries, not a failure.
	for range 8 {
		fd, err := unix.Openat2(dir, rel, &how)
		if err != unix.EAGAIN && err != unix.EINTR {
			return fd, err
		}
	}
	return -1, unix.EAGAIN
}

// writeFile writes data to a cgroupfs interface file in a single write(2),
// which is how the kernel expects commands such as "+pids" or "1".
func writeFile(mount, rel, data string) error {
	full := path.Join(mount, rel)
	fd, err := openBeneath(mount, rel, unix.O_WRONLY)
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", data, full, err)
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Write(fd, []byte(data))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("write %q to %s: %w", data, full, err)
		}
		if n != len(data) {
			return fmt.Errorf("write %q to %s: %w", data, full, io.ErrShortWrite)
		}
		return nil
	}
}

// readFile reads a whole cgroupfs interface file.
func readFile(mount, rel string) ([]byte, error) {
	full := path.Join(mount, rel)
	fd, err := openBeneath(mount, rel, unix.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", full, err)
	}
	f := os.NewFile(uintptr(fd), full)
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", full, err)
	}
	return b, nil
}

// mkdirBeneath creates the cgroup dir/name with mode 0755.
func mkdirBeneath(mount, dir, name string) error {
	fd, err := openBeneath(mount, dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("mkdir %s: %w", path.Join(mount, dir, name), err)
	}
	defer unix.Close(fd)
	if err := unix.Mkdirat(fd, name, 0o755); err != nil {
		return &os.PathError{Op: "mkdir", Path: path.Join(mount, dir, name), Err: err}
	}
	return nil
}

// rmdirBeneath removes the cgroup dir/name; the kernel refuses (EBUSY) while
// it has processes or children.
func rmdirBeneath(mount, dir, name string) error {
	fd, err := openBeneath(mount, dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("rmdir %s: %w", path.Join(mount, dir, name), err)
	}
	defer unix.Close(fd)
	if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil {
		return &os.PathError{Op: "rmdir", Path: path.Join(mount, dir, name), Err: err}
	}
	return nil
}

// cgroupIDOf returns the cgroup id of the directory at rel. The kernel's
// file handle for a cgroupfs directory is exactly the 64-bit kernfs id that
// bpf_get_current_cgroup_id returns; the inode number equals it only where
// ino_t is 64 bits, so it is the fallback, not the source.
func cgroupIDOf(mount, rel string) (uint64, error) {
	full := path.Join(mount, rel)
	fd, err := openBeneath(mount, rel, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return 0, fmt.Errorf("cgroup id of %s: %w", full, err)
	}
	defer unix.Close(fd)
	if h, _, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH); err == nil && h.Size() == 8 {
		return binary.NativeEndian.Uint64(h.Bytes()), nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("cgroup id of %s: fstat: %w", full, err)
	}
	return uint64(st.Ino), nil
}
