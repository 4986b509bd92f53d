// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"fmt"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Assemble turns a program into the kernel's form. Callers assemble
// before they start confining, so that no mistake can leave a
// half-confined process behind.
func Assemble(prog []bpf.Instruction) ([]unix.SockFilter, error) {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assembling the filter: %w", err)
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// Install attaches filter to the calling thread (and what it execs and
// starts) without SECCOMP_FILTER_FLAG_TSYNC: the callers exec next, and
// execve hands the calling thread's filters to the new program.
// no_new_privs must already be set (seccomp needs it without
// CAP_SYS_ADMIN).
func Install(filter []unix.SockFilter) error {
	if len(filter) == 0 {
		return fmt.Errorf("seccomp: installing an empty filter")
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: installing the filter: %w", errno)
	}
	return nil
}

// ActionsAvailable returns nil when the kernel knows every return action
// the programs here use.
func ActionsAvailable() error {
	for _, action := range []uint32{seccompRetKillProcess, seccompRetErrno, seccompRetAllow} {
		_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
		if errno != 0 {
			return fmt.Errorf("seccomp: action %#x is not available: %w", action, errno)
		}
	}
	return nil
}
