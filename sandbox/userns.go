// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// A session must not mount: in a user namespace of its own, a process of
// the session is root over a copy of the session's mounts, and although
// it cannot unmount or reveal what the sandbox covered (the kernel locks
// those mounts), it can mount over them: bind another socket over
// $SSH_AUTH_SOCK, which the datapath allows by name, and reach a relay
// outside the session under an allowed name. Measured on Linux 6.18:
// `unshare -rm` then `mount --bind relay.sock $SSH_AUTH_SOCK` over the
// sandbox's pinned (and locked) mount succeeds without a Landlock domain,
// and fails with one: a domain that handles any file access refuses every
// change to the mount topology (mount, move_mount, umount, pivot_root), in
// every namespace. So a session with process isolation may create user
// namespaces (Chromium's sandbox needs them), and a session without it
// (--share-processes) may not, unless it opts in (--allow-userns).
//
// The filter refuses unshare(2) and clone(2) with CLONE_NEWUSER (EPERM,
// as on a machine where user namespaces are disabled) and answers clone3
// with ENOSYS, because seccomp cannot read clone3's flags (they are in
// memory): glibc, musl and Go then fall back to clone(2), whose flags it
// can read, as they do under Docker's default seccomp profile. setns(2)
// into a user namespace needs a descriptor of one, and the session's
// Landlock domain keeps it from opening another process's namespaces.

// Linux UAPI values the filter is built from, spelled out so that it
// can be assembled and tested on any OS.
const (
	seccompRetKillProcess = 0x80000000
	seccompRetErrno       = 0x00050000
	seccompRetAllow       = 0x7fff0000

	cloneNewUser = 0x10000000

	errnoEPERM  = 1
	errnoENOSYS = 38

	offNr    = 0
	offArch  = 4
	offArg0  = 16 // low half of args[0] (little-endian)
	x32Bit   = 0x40000000
	archX64  = 0xc000003e
	archA64  = 0xc00000b7
	nrClone3 = 435
)

// usernsArch is one native system call ABI the filter knows.
type usernsArch struct {
	audit          uint32
	x32            bool
	clone, unshare uint32
}

var usernsArches = map[string]usernsArch{
	"amd64": {audit: archX64, x32: true, clone: 56, unshare: 272},
	"arm64": {audit: archA64, clone: 220, unshare: 97},
}

// usernsProgram is the seccomp program that refuses new user namespaces
// on goarch. System calls of another ABI (x32, i386 on amd64) kill the
// process: the filter could not read them, and BPF mode's socket-family
// filter kills them too.
func usernsProgram(goarch string) ([]bpf.Instruction, error) {
	a, ok := usernsArches[goarch]
	if !ok {
		return nil, fmt.Errorf("sandbox: no user-namespace filter for GOARCH %s (only amd64 and arm64)", goarch)
	}
	// Instructions, with jumps counted to the returns at the end.
	p := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},                     // 0
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.audit, SkipFalse: 9}, // 1: -> kill (11)
		bpf.LoadAbsolute{Off: offNr, Size: 4},                       // 2
	}
	if a.x32 {
		p = append(p, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipTrue: 7}) // 3: -> kill (11)
	} else {
		p = append(p, bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0xffffffff, SkipTrue: 7}) // 3: never true
	}
	p = append(p,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nrClone3, SkipTrue: 5},       // 4: -> enosys (10)
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.clone, SkipTrue: 1},        // 5: -> flags (7)
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.unshare, SkipFalse: 2},     // 6: -> allow (9)
		bpf.LoadAbsolute{Off: offArg0, Size: 4},                           // 7: flags
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNewUser, SkipTrue: 3}, // 8: -> eperm (12)
		bpf.RetConstant{Val: seccompRetAllow},                             // 9: allow
		bpf.RetConstant{Val: seccompRetErrno | errnoENOSYS},               // 10: enosys
		bpf.RetConstant{Val: seccompRetKillProcess},                       // 11: kill
		bpf.RetConstant{Val: seccompRetErrno | errnoEPERM},                // 12: eperm
	)
	return p, nil
}
