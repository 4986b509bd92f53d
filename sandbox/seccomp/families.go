// SPDX-License-Identifier: Apache-2.0

package seccomp

import "golang.org/x/net/bpf"

// Families returns the seccomp program of BPF mode: socket(2) only
// for AF_UNIX, AF_NETLINK, AF_INET and AF_INET6. The cgroup datapath
// judges every inet socket, but it does not see other families at all:
// AF_VSOCK reaches the hypervisor's host, AF_TIPC, AF_RDS and friends are
// networks of their own. io_uring_setup gets EPERM, as in Landlock mode and
// Docker's default seccomp profile: IORING_OP_SOCKET creates sockets without
// the socket(2) system call, so this filter could not see their family.
// Programs fall back to plain system calls (libuv, liburing users); its
// connects would go through the datapath, but its sockets would not.
func Families(goarch string) ([]bpf.Instruction, error) {
	a, err := archOf(goarch)
	if err != nil {
		return nil, err
	}
	var p asm
	p.load(offArch)
	p.jeq(a.audit, "", "kill")
	p.load(offNr)
	if a.x32 {
		p.jge(x32SyscallBit, "x32", "")
	}
	p.jeq(a.ioUringSetup, "eperm", "")
	p.jeq(a.socket, "", "allow")
	p.load(argLow(0))
	p.jeq(afUnix, "allow", "")
	p.jeq(afNetlink, "allow", "")
	p.jeq(afInet, "allow", "")
	p.jeq(afInet6, "allow", "eafnosupport")
	if a.x32 {
		p.label("x32")
		p.jeq(0xffffffff, "allow", "kill")
	}
	p.label("allow")
	p.emit(bpf.RetConstant{Val: seccompRetAllow})
	p.label("eperm")
	p.emit(bpf.RetConstant{Val: seccompRetErrno | errnoEPERM})
	p.label("eafnosupport")
	p.emit(bpf.RetConstant{Val: seccompRetErrno | errnoEAFNOSUPPORT})
	p.label("kill")
	p.emit(bpf.RetConstant{Val: seccompRetKillProcess})
	return p.resolve()
}
