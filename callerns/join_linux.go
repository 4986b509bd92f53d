// SPDX-License-Identifier: Apache-2.0

package callerns

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PIDFD_GET_*_NAMESPACE, _IO(0xFF, n) (Linux 6.11).
const (
	pidfdGetNetNamespace  = 0xff04
	pidfdGetUserNamespace = 0xff09
)

// Joined are the namespaces Join enters besides the mount namespace.
const Joined = unix.CLONE_NEWNET | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWPID

// withFD runs fn with pidfd's descriptor.
func withFD(pidfd *os.File, fn func(fd int) error) error {
	if pidfd == nil {
		return errors.New("no pidfd of the caller (SO_PEERPIDFD, Linux 6.5): its namespaces cannot be found safely")
	}
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// openNS opens one namespace of the pidfd's process: through the pidfd
// where the kernel can (6.11), else through /proc/PID/ns/NAME, confirmed
// afterwards to be the pidfd's process (a pid can be reused; a pidfd
// cannot).
func openNS(pidfd int, ioctl uint, name string) (int, error) {
	if ns, err := unix.IoctlRetInt(pidfd, ioctl); err == nil {
		return ns, nil
	}
	return openProc(pidfd, "ns/"+name, unix.O_RDONLY)
}

// openProc opens /proc/PID/rel of the pidfd's process and checks that the
// process was still alive after the open.
func openProc(pidfd int, rel string, flags int) (int, error) {
	pid, err := pidOf(pidfd)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/%s", pid, rel), flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("the caller's %s: %w", rel, err)
	}
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("the caller exited while its %s was opened: %w", rel, err)
	}
	return fd, nil
}

// pidOf reads the "Pid:" line of the pidfd's fdinfo.
func pidOf(pidfd int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/thread-self/fdinfo/%d", pidfd))
	if err != nil {
		return 0, fmt.Errorf("the caller's pidfd: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || pid <= 0 {
				return 0, fmt.Errorf("the caller is gone or in a pid namespace the daemon cannot see (pidfd says %q)", strings.TrimSpace(v))
			}
			return pid, nil
		}
	}
	return 0, errors.New("no Pid in the caller's pidfd")
}

func sameFile(fd int, path string) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		return false, err
	}
	if err := unix.Stat(path, &b); err != nil {
		return false, err
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// Check refuses a caller whose namespaces a session is not started in:
// one in another user namespace (see the package comment).
func Check(pidfd *os.File) error {
	return withFD(pidfd, func(fd int) error {
		ns, err := openNS(fd, pidfdGetUserNamespace, "user")
		if err != nil {
			return err
		}
		defer unix.Close(ns)
		same, err := sameFile(ns, "/proc/self/ns/user")
		if err != nil {
			return fmt.Errorf("compare user namespaces: %w", err)
		}
		if !same {
			return errors.New("the caller is in another user namespace (a rootless container, unshare -r): there it could mount over what the daemon runs for it, and its uid is not the one the daemon judges; a session is started only in namespaces owned by the daemon's user namespace")
		}
		return nil
	})
}

// NetNS opens the caller's network namespace, where the session's
// resolver and proxy must listen: its loopback is the command's.
func NetNS(pidfd *os.File) (*os.File, error) {
	var f *os.File
	err := withFD(pidfd, func(fd int) error {
		ns, err := openNS(fd, pidfdGetNetNamespace, "net")
		if err != nil {
			return err
		}
		f = os.NewFile(uintptr(ns), "caller-netns")
		return nil
	})
	return f, err
}

// Join moves the calling thread, which must be locked and thrown away
// afterwards, into the caller's network, UTS, IPC and mount namespaces,
// and makes its children start in the caller's PID namespace, which it
// returns opened (for a /proc that lists the command's processes: once
// in the caller's mount namespace, this thread cannot name it). It
// refuses a caller whose root directory is not its mount namespace's root
// (a chroot inside the container): the command would run outside it. The
// user namespace is checked (Check), not joined.
func Join(pidfd *os.File) (pidns *os.File, err error) {
	if err := Check(pidfd); err != nil {
		return nil, err
	}
	err = withFD(pidfd, func(fd int) error {
		root, err := openProc(fd, "root", unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		defer unix.Close(root)
		// setns(CLONE_NEWNS) needs a thread that does not share its root
		// and working directory with the runtime's others.
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return fmt.Errorf("unshare(CLONE_FS): %w", err)
		}
		if err := unix.Setns(fd, Joined); err != nil {
			return fmt.Errorf("enter the caller's namespaces: %w", err)
		}
		if pidns, err = os.Open(fmt.Sprintf("/proc/self/task/%d/ns/pid_for_children", unix.Gettid())); err != nil {
			return fmt.Errorf("the PID namespace for the command: %w", err)
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("enter the caller's mount namespace: %w", err)
		}
		same, err := sameFile(root, "/")
		if err != nil {
			return fmt.Errorf("compare the caller's root: %w", err)
		}
		if !same {
			return errors.New("the caller's root directory is not its mount namespace's root (chroot?): the command would run outside it; call sluice from outside the chroot")
		}
		return nil
	})
	if err != nil && pidns != nil {
		pidns.Close()
		pidns = nil
	}
	return pidns, err
}
