// SPDX-License-Identifier: Apache-2.0

package seccomp

import "golang.org/x/net/bpf"

// NoUserNamespaces returns the program that refuses new user namespaces
// on goarch: a session without process isolation (--share-processes)
// gets it unless it opts in (--allow-userns).
//
// Why: in a user namespace of its own, a process of the session is root
// over a copy of the session's mounts, and although it cannot unmount or
// reveal what the sandbox covered (the kernel locks those mounts), it can
// mount over them: bind another socket over $SSH_AUTH_SOCK, which the
// datapath allows by name, and reach a relay outside the session under an
// allowed name. Measured on Linux 6.18: `unshare -rm` then `mount --bind
// relay.sock $SSH_AUTH_SOCK` over the sandbox's pinned (and locked) mount
// succeeds without a Landlock domain, and fails with one: a domain that
// handles any file access refuses every change to the mount topology
// (mount, move_mount, umount, pivot_root), in every namespace. So a
// session with process isolation may create user namespaces (Chromium's
// sandbox needs them), and a session without it may not.
//
// The program refuses unshare(2) and clone(2) with CLONE_NEWUSER (EPERM,
// as on a machine where user namespaces are disabled) and answers clone3
// with ENOSYS, because seccomp cannot read clone3's flags (they are in
// memory): glibc, musl and Go then fall back to clone(2), whose flags it
// can read, as they do under Docker's default seccomp profile. setns(2)
// into a user namespace needs a descriptor of one, and the session's
// Landlock domain keeps it from opening another process's namespaces.
// System calls of another ABI (x32, i386 on amd64) kill the process: the
// filter could not read them, and the families filter kills them too.
func NoUserNamespaces(goarch string) ([]bpf.Instruction, error) {
	a, err := archOf(goarch)
	if err != nil {
		return nil, err
	}
	var p asm
	p.load(offArch)
	p.jeq(a.audit, "", "kill")
	p.load(offNr)
	if a.x32 {
		p.jge(x32SyscallBit, "kill", "") // -1 (a tracer's skip) too
	} else {
		p.jeq(0xffffffff, "kill", "") // as on amd64
	}
	p.jeq(a.clone3, "enosys", "")
	p.jeq(a.clone, "flags", "")
	p.jeq(a.unshare, "flags", "allow")
	// clone(flags, ...) and unshare(flags) both take the flags first.
	p.label("flags")
	p.load(argLow(0))
	p.jset(cloneNewUser, "eperm", "allow")
	p.label("allow")
	p.emit(bpf.RetConstant{Val: seccompRetAllow})
	p.label("enosys")
	p.emit(bpf.RetConstant{Val: seccompRetErrno | errnoENOSYS})
	p.label("kill")
	p.emit(bpf.RetConstant{Val: seccompRetKillProcess})
	p.label("eperm")
	p.emit(bpf.RetConstant{Val: seccompRetErrno | errnoEPERM})
	return p.resolve()
}
