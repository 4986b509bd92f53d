// SPDX-License-Identifier: Apache-2.0

package landlock

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompFilter assembles the program for goarch into the kernel's form.
func seccompFilter(goarch string) ([]unix.SockFilter, error) {
	prog, err := filterProgram(goarch)
	if err != nil {
		return nil, err
	}
	return toSockFilter(prog)
}

// toSockFilter assembles a classic BPF program for seccomp.
func toSockFilter(prog []bpf.Instruction) ([]unix.SockFilter, error) {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("landlock: assembling the seccomp filter: %w", err)
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// installFilter attaches filter to the calling thread. no_new_privs must
// already be set.
func installFilter(filter []unix.SockFilter) error {
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("landlock: installing the seccomp filter: %w", errno)
	}
	return nil
}

// ExecFamilies replaces the calling process with argv[0] (looked up on
// env's PATH) under no_new_privs and a seccomp filter that refuses
// socket(2) for every family but AF_UNIX, AF_NETLINK, AF_INET and AF_INET6
// (EAFNOSUPPORT, as if the kernel lacked them). BPF mode runs the command
// through it: the cgroup datapath judges inet sockets and sees no others.
// path, when not empty, is the executable (already resolved by the caller).
func ExecFamilies(path string, argv []string, env []string) error {
	if len(argv) == 0 {
		return errors.New("seccomp: no command")
	}
	if path == "" {
		var err error
		if path, err = lookPath(argv[0], env); err != nil {
			return err
		}
	}
	prog, err := familiesProgram(runtime.GOARCH)
	if err != nil {
		return err
	}
	filter, err := toSockFilter(prog)
	if err != nil {
		return err
	}
	runtime.LockOSThread() // never unlocked: the filter is this thread's
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: setting no_new_privs: %w", err)
	}
	if err := installFilter(filter); err != nil {
		return err
	}
	if err := unix.Exec(path, argv, env); err != nil {
		return fmt.Errorf("executing %s: %w", path, err)
	}
	return nil
}
