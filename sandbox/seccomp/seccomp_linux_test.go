// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestConstants checks the UAPI values spelled out in seccomp.go against
// golang.org/x/sys/unix, and the native architecture's table against its
// system call numbers.
func TestConstants(t *testing.T) {
	pairs := []struct {
		name      string
		ours, sys uint64
	}{
		{"SECCOMP_RET_KILL_PROCESS", seccompRetKillProcess, unix.SECCOMP_RET_KILL_PROCESS},
		{"SECCOMP_RET_ERRNO", seccompRetErrno, unix.SECCOMP_RET_ERRNO},
		{"SECCOMP_RET_ALLOW", seccompRetAllow, unix.SECCOMP_RET_ALLOW},
		{"AUDIT_ARCH_X86_64", auditArchX86_64, unix.AUDIT_ARCH_X86_64},
		{"AUDIT_ARCH_AARCH64", auditArchAArch64, unix.AUDIT_ARCH_AARCH64},
		{"AUDIT_ARCH_I386", auditArchI386, unix.AUDIT_ARCH_I386},
		{"AUDIT_ARCH_ARM", auditArchARM, unix.AUDIT_ARCH_ARM},
		{"AF_UNIX", afUnix, unix.AF_UNIX},
		{"AF_INET", afInet, unix.AF_INET},
		{"AF_INET6", afInet6, unix.AF_INET6},
		{"AF_NETLINK", afNetlink, unix.AF_NETLINK},
		{"AF_PACKET", afPacket, unix.AF_PACKET},
		{"AF_VSOCK", afVsock, unix.AF_VSOCK},
		{"SOCK_STREAM", sockStream, unix.SOCK_STREAM},
		{"SOCK_DGRAM", sockDgram, unix.SOCK_DGRAM},
		{"SOCK_RAW", sockRaw, unix.SOCK_RAW},
		{"SOCK_SEQPACKET", sockSeqpacket, unix.SOCK_SEQPACKET},
		{"SOCK_NONBLOCK", sockNonblock, unix.SOCK_NONBLOCK},
		{"SOCK_CLOEXEC", sockCloexec, unix.SOCK_CLOEXEC},
		{"IPPROTO_TCP", ipprotoTCP, unix.IPPROTO_TCP},
		{"IPPROTO_ICMP", ipprotoICMP, unix.IPPROTO_ICMP},
		{"IPPROTO_SCTP", ipprotoSCTP, unix.IPPROTO_SCTP},
		{"IPPROTO_MPTCP", ipprotoMPTCP, unix.IPPROTO_MPTCP},
		{"MSG_FASTOPEN", msgFastopen, unix.MSG_FASTOPEN},
		{"MSG_DONTWAIT", msgDontwait, unix.MSG_DONTWAIT},
		{"MSG_NOSIGNAL", msgNosignal, unix.MSG_NOSIGNAL},
		{"EPERM", errnoEPERM, uint64(unix.EPERM)},
		{"EOPNOTSUPP", errnoEOPNOTSUPP, uint64(unix.EOPNOTSUPP)},
		{"EAFNOSUPPORT", errnoEAFNOSUPPORT, uint64(unix.EAFNOSUPPORT)},
		{"ENOSYS", errnoENOSYS, uint64(unix.ENOSYS)},
		{"CLONE_NEWUSER", cloneNewUser, unix.CLONE_NEWUSER},
	}
	for _, p := range pairs {
		if p.ours != p.sys {
			t.Errorf("%s: %#x here, %#x in x/sys/unix", p.name, p.ours, p.sys)
		}
	}

	a, ok := arches[runtime.GOARCH]
	if !ok {
		t.Skipf("no table for %s", runtime.GOARCH)
	}
	nrs := []struct {
		name      string
		ours, sys uint32
	}{
		{"socket", a.socket, unix.SYS_SOCKET},
		{"sendto", a.sendto, unix.SYS_SENDTO},
		{"sendmsg", a.sendmsg, unix.SYS_SENDMSG},
		{"sendmmsg", a.sendmmsg, unix.SYS_SENDMMSG},
		{"io_uring_setup", a.ioUringSetup, unix.SYS_IO_URING_SETUP},
		{"clone", a.clone, unix.SYS_CLONE},
		{"unshare", a.unshare, unix.SYS_UNSHARE},
		{"clone3", a.clone3, unix.SYS_CLONE3},
	}
	for _, n := range nrs {
		if n.ours != n.sys {
			t.Errorf("%s on %s: %d here, %d in x/sys/unix", n.name, runtime.GOARCH, n.ours, n.sys)
		}
	}
}

func TestSeccompFilterConverts(t *testing.T) {
	prog, err := TCPOnly(runtime.GOARCH)
	if err != nil {
		t.Skip(err)
	}
	f, err := Assemble(prog)
	if err != nil {
		t.Fatal(err)
	}
	if len(f) == 0 || f[len(f)-1].Code != unix.BPF_RET|unix.BPF_K {
		t.Errorf("filter does not end in a return: %+v", f)
	}
}
