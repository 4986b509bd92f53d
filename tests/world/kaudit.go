// SPDX-License-Identifier: Apache-2.0

//go:build linux

package world

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/kaudit"
	"github.com/sluice-dev/sluice/sandbox"
)

// auditUsers counts the tests that asked for the kernel's audit at once
// (subtests may overlap); the state before the first is restored after
// the last.
var auditUsers struct {
	sync.Mutex
	n       int
	restore bool
}

// EnableKernelAudit turns the machine's audit on for the test, as auditd
// would, so that Landlock writes its records (sluice reads them but never
// turns audit on itself: package kaudit), and turns it off again when the
// test ends if it was off. It skips the test where the kernel cannot give
// Landlock's records (Landlock ABI < 7).
func EnableKernelAudit(t testing.TB) {
	t.Helper()
	if abi := sandbox.LandlockABI(); abi < 7 {
		t.Skipf("Landlock ABI %d writes no audit records (ABI 7, Linux 6.15)", abi)
	}
	auditUsers.Lock()
	defer auditUsers.Unlock()
	if auditUsers.n == 0 {
		on, err := kaudit.Status()
		if err != nil {
			t.Skipf("the kernel's audit status cannot be read: %v", err)
		}
		if !on {
			if err := setAudit(1); err != nil {
				t.Fatalf("turn the kernel's audit on: %v", err)
			}
			auditUsers.restore = true
		}
	}
	auditUsers.n++
	t.Cleanup(func() {
		auditUsers.Lock()
		defer auditUsers.Unlock()
		auditUsers.n--
		if auditUsers.n == 0 && auditUsers.restore {
			auditUsers.restore = false
			if err := setAudit(0); err != nil {
				t.Errorf("turn the kernel's audit off again: %v", err)
			}
		}
	})
}

// setAudit sends AUDIT_SET with the enabled flag.
func setAudit(enabled uint32) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(2 * time.Second))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	// struct audit_status: mask, enabled, then fields AUDIT_SET ignores
	// unless the mask names them.
	var status [44]byte
	binary.NativeEndian.PutUint32(status[0:4], unix.AUDIT_STATUS_ENABLED)
	binary.NativeEndian.PutUint32(status[4:8], enabled)
	msg := make([]byte, unix.NLMSG_HDRLEN+len(status))
	*(*unix.NlMsghdr)(unsafe.Pointer(&msg[0])) = unix.NlMsghdr{Len: uint32(len(msg)), Type: unix.AUDIT_SET, Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK, Seq: 1}
	copy(msg[unix.NLMSG_HDRLEN:], status[:])
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		if n < unix.NLMSG_HDRLEN+4 {
			continue
		}
		if binary.NativeEndian.Uint16(buf[4:6]) == unix.NLMSG_ERROR {
			if e := int32(binary.NativeEndian.Uint32(buf[unix.NLMSG_HDRLEN:])); e != 0 {
				return fmt.Errorf("AUDIT_SET: %w", unix.Errno(-e))
			}
			return nil
		}
	}
}
