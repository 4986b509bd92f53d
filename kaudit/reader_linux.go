// SPDX-License-Identifier: Apache-2.0

package kaudit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nlgrpReadlog is AUDIT_NLGRP_READLOG, the audit netlink socket's
// read-only multicast group (Linux 3.16).
const nlgrpReadlog = 1

// Reader receives the kernel's audit records from the read-only multicast
// group. It needs CAP_AUDIT_READ in the initial user namespace.
type Reader struct {
	f  *os.File
	rc syscall.RawConn
	// Lost counts the times the socket's buffer overflowed (ENOBUFS):
	// records were dropped before they were read.
	Lost atomic.Uint64
}

// Open subscribes to the audit multicast group.
func Open() (*Reader, error) {
	fd, err := auditSocket()
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (nlgrpReadlog - 1)}); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("kaudit: read the audit multicast group: %w (it needs CAP_AUDIT_READ: a systemd unit's CapabilityBoundingSet= must keep it)", err)
		}
		return nil, fmt.Errorf("kaudit: read the audit multicast group: %w", err)
	}
	// With audit on, every record of the machine comes here (BPF program
	// loads, logins, ...): a large buffer keeps bursts from costing
	// Landlock's few.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	// Through the runtime's poller, so that Close wakes a Read and Read
	// can time out.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("kaudit: %w", err)
	}
	f := os.NewFile(uintptr(fd), "audit-netlink")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("kaudit: %w", err)
	}
	return &Reader{f: f, rc: rc}, nil
}

// ErrTimeout is Read's answer when no record arrived for a while: the
// caller may flush what waits (Assembler.Flush) and read again.
var ErrTimeout = errors.New("kaudit: no record")

// ErrClosed is Read's answer after Close.
var ErrClosed = errors.New("kaudit: reader closed")

// Read returns the next record whose type keep accepts, ErrTimeout when
// none came within wait, or ErrClosed after Close.
func (r *Reader) Read(buf []byte, keep func(uint16) bool, wait time.Duration) (Record, error) {
	if err := r.f.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return Record{}, ErrClosed
	}
	for {
		var n int
		var rerr error
		err := r.rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, 0)
			return !errors.Is(rerr, unix.EAGAIN)
		})
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return Record{}, ErrTimeout
		case err != nil:
			return Record{}, ErrClosed
		case errors.Is(rerr, unix.ENOBUFS):
			r.Lost.Add(1)
			continue
		case errors.Is(rerr, unix.EINTR):
			continue
		case rerr != nil:
			return Record{}, fmt.Errorf("kaudit: read: %w", rerr)
		}
		if n < unix.NLMSG_HDRLEN {
			continue
		}
		l := binary.NativeEndian.Uint32(buf[0:4])
		typ := binary.NativeEndian.Uint16(buf[4:6])
		if keep != nil && !keep(typ) {
			continue
		}
		end := min(int(l), n)
		if end < unix.NLMSG_HDRLEN {
			continue
		}
		rec, err := ParseRecord(typ, string(buf[unix.NLMSG_HDRLEN:end]))
		if err != nil {
			continue
		}
		return rec, nil
	}
}

// Close stops the reader; a Read in progress returns ErrClosed.
func (r *Reader) Close() error { return r.f.Close() }

// auditStatus is struct audit_status up to backlog_wait_time_actual.
type auditStatus struct {
	Mask, Enabled, Failure, Pid, RateLimit, BacklogLimit, Lost, Backlog uint32
	FeatureBitmap, BacklogWaitTime, BacklogWaitTimeActual               uint32
}

// Status reports whether the machine's audit is enabled (auditd or
// audit=1 turned it on; 2: enabled and locked), as AUDIT_GET says. It
// needs CAP_AUDIT_CONTROL.
func Status() (enabled bool, err error) {
	fd, err := auditSocket()
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(2 * time.Second))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	msg := make([]byte, unix.NLMSG_HDRLEN)
	*(*unix.NlMsghdr)(unsafe.Pointer(&msg[0])) = unix.NlMsghdr{Len: unix.NLMSG_HDRLEN, Type: unix.AUDIT_GET, Flags: unix.NLM_F_REQUEST, Seq: 1, Pid: 0}
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, fmt.Errorf("kaudit: ask for the audit status: %w", err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return false, fmt.Errorf("kaudit: audit status: %w", err)
		}
		if n < unix.NLMSG_HDRLEN {
			continue
		}
		typ := binary.NativeEndian.Uint16(buf[4:6])
		body := buf[unix.NLMSG_HDRLEN:n]
		switch typ {
		case unix.NLMSG_ERROR:
			if len(body) >= 4 {
				if e := int32(binary.NativeEndian.Uint32(body[:4])); e != 0 {
					return false, fmt.Errorf("kaudit: audit status: %w", unix.Errno(-e))
				}
			}
		case unix.AUDIT_GET:
			if len(body) < 8 {
				return false, errors.New("kaudit: audit status: short reply")
			}
			var st auditStatus
			copy((*[unsafe.Sizeof(st)]byte)(unsafe.Pointer(&st))[:], body)
			return st.Enabled != 0, nil
		}
	}
}

// CgroupOf is the cgroup v2 path of pid ("0::" line of /proc/PID/cgroup),
// relative to the cgroup2 root, or "" when pid is gone.
func CgroupOf(pid uint32) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "0::"); ok {
			return p
		}
	}
	return ""
}

// Explained reports whether the refusals of a session's Landlock domain
// can be explained on this machine, and if not, why and what would fix it.
// abi is the kernel's Landlock ABI.
func Explained(abi int) (why, fix string, ok bool) {
	if abi < 7 {
		return fmt.Sprintf("Landlock ABI %d writes no audit records (ABI 7, Linux 6.15)", abi), "Linux >= 6.15 with CONFIG_AUDIT", false
	}
	on, err := Status()
	if err != nil {
		return "the audit status cannot be read: " + err.Error(), "run as root (CAP_AUDIT_CONTROL, CAP_AUDIT_READ)", false
	}
	if !on {
		return "the machine's audit is off, so Landlock writes no records (sluice does not turn it on: it would add a syscall audit context to every process)",
			"run auditd, or boot with audit=1 (or auditctl -e 1)", false
	}
	r, err := Open()
	if err != nil {
		return err.Error(), "keep CAP_AUDIT_READ", false
	}
	defer r.Close()
	// Joining the group makes the kernel write an AUDIT_EVENT_LISTENER
	// record about this process: it arrives only where records arrive.
	buf := make([]byte, 1<<16)
	deadline := time.Now().Add(2 * time.Second)
	me := strconv.Itoa(os.Getpid())
	for time.Now().Before(deadline) {
		rec, err := r.Read(buf, func(t uint16) bool { return t == typeEventListener }, time.Until(deadline))
		if err != nil {
			break
		}
		if rec.Get("pid") == me {
			return "", "", true
		}
	}
	return "no audit record reaches sluice: it runs in a network namespace other than the initial one (a container's), and the kernel sends its records only there", "run sluice in the host's network namespace", false
}

// typeEventListener is AUDIT_EVENT_LISTENER: a process joined or left the
// multicast group.
const typeEventListener = 1335

// auditSocket opens an audit netlink socket in the initial network
// namespace, where the kernel sends its multicast records: a socket of
// another network namespace hears none of them. A sluice started in a
// namespace of its own (nsenter, ip netns exec) so still reads them. The
// initial namespace is recognised by a sysctl only it has
// (net.core.netdev_max_backlog), looked for in this thread's namespace,
// then in those of pid 1 and of this process's ancestors, oldest first.
// Where none is found (a container's namespace, and no way out), the
// socket is made in the caller's namespace: Explained then finds that no
// records arrive.
func auditSocket() (int, error) {
	type res struct {
		fd  int
		err error
	}
	done := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		if !isInitNet() {
			for _, pid := range outermostFirst() {
				fd, err := socketIn(fmt.Sprintf("/proc/%d/ns/net", pid))
				if errors.Is(err, errNotEntered) {
					continue
				}
				if err == nil {
					runtime.UnlockOSThread()
				}
				// Left locked if the thread could not go back: the
				// runtime ends it with the goroutine.
				done <- res{fd, err}
				return
			}
		}
		runtime.UnlockOSThread()
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
		if err != nil {
			err = fmt.Errorf("kaudit: audit netlink socket: %w", err)
		}
		done <- res{fd, err}
	}()
	r := <-done
	return r.fd, r.err
}

// isInitNet reports whether the calling thread is in the initial network
// namespace: net.core.netdev_max_backlog is registered there only.
func isInitNet() bool {
	return unix.Access("/proc/sys/net/core/netdev_max_backlog", unix.F_OK) == nil
}

// outermostFirst is pid 1, then this process's ancestors from the oldest
// down to its parent.
func outermostFirst() []int {
	var chain []int
	for pid := os.Getppid(); pid > 1 && len(chain) < 64; {
		chain = append(chain, pid)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break
		}
		// The fields after the comm, which ends with the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			break
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			break
		}
		pid = ppid
	}
	out := []int{1}
	for i := len(chain) - 1; i >= 0; i-- {
		out = append(out, chain[i])
	}
	return out
}

var errNotEntered = errors.New("kaudit: the initial network namespace was not entered")

// socketIn makes the socket in the network namespace at path, if that is
// the initial one, and returns the calling (locked) thread to its own;
// errNotEntered when it could not enter it or it is not the initial one.
func socketIn(path string) (int, error) {
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errNotEntered
	}
	defer unix.Close(target)
	own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errNotEntered
	}
	defer unix.Close(own)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return -1, errNotEntered
	}
	fd, serr := -1, errNotEntered
	if isInitNet() {
		fd, serr = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
		if serr != nil {
			serr = fmt.Errorf("kaudit: audit netlink socket: %w", serr)
		}
	}
	if err := unix.Setns(own, unix.CLONE_NEWNET); err != nil {
		if serr == nil {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("kaudit: return to the network namespace: %w", err)
	}
	return fd, serr
}
