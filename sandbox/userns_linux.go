// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// RefuseUserNamespaces installs, on the calling thread (and what it execs
// and starts), the seccomp filter that refuses new user namespaces (see
// usernsProgram for why). It sets no_new_privs, which seccomp needs
// without CAP_SYS_ADMIN; the session's command has it already.
func RefuseUserNamespaces() error {
	prog, err := usernsProgram(runtime.GOARCH)
	if err != nil {
		return err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("sandbox: assemble the user-namespace filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("sandbox: install the user-namespace filter: %w", errno)
	}
	return nil
}
