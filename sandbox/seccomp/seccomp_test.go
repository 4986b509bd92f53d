// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/net/bpf"
)

// Values used only by the tests (Linux UAPI).
const (
	auditArchI386 = 0x40000003
	auditArchARM  = 0x40000028

	sockDgram     = 2
	sockRaw       = 3
	sockSeqpacket = 5
	sockNonblock  = 0o4000
	sockCloexec   = 0o2000000

	afPacket = 17
	afVsock  = 40

	ipprotoICMP  = 1
	ipprotoSCTP  = 132
	ipprotoMPTCP = 262

	msgDontwait  = 0x40
	msgNosignal  = 0x4000
	sysRead      = 0 // amd64; any number the filter does not look at
	sysSocketpr  = 53
	sysSocketA64 = 198
)

// call is a fake struct seccomp_data.
type call struct {
	arch uint32
	nr   uint32
	args [6]uint64
}

// bytes lays c out for golang.org/x/net/bpf's VM. The VM loads 32-bit words
// big-endian (it was written for packets) while seccomp loads them in host
// order, so each word the filter reads is stored big-endian here: the filter
// then sees exactly the values the kernel would give it. An argument's low
// half sits first, as on the little-endian hosts the filter supports.
func (c call) bytes() []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], c.nr)
	binary.BigEndian.PutUint32(b[offArch:], c.arch)
	for i, a := range c.args {
		binary.BigEndian.PutUint32(b[argLow(i):], uint32(a))
		binary.BigEndian.PutUint32(b[argLow(i)+4:], uint32(a>>32))
	}
	return b
}

// verdict names a seccomp return value for test output.
func verdict(v uint32) string {
	switch v {
	case seccompRetAllow:
		return "allow"
	case seccompRetKillProcess:
		return "kill"
	case seccompRetErrno | errnoEPERM:
		return "EPERM"
	case seccompRetErrno | errnoEOPNOTSUPP:
		return "EOPNOTSUPP"
	case seccompRetErrno | errnoEAFNOSUPPORT:
		return "EAFNOSUPPORT"
	}
	return fmt.Sprintf("%#x", v)
}

func verdictOf(t *testing.T, goarch string, c call) string {
	t.Helper()
	return verdictOfProgram(t, TCPOnly, goarch, c)
}

func verdictOfProgram(t *testing.T, build func(string) ([]bpf.Instruction, error), goarch string, c call) string {
	t.Helper()
	prog, err := build(goarch)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("program rejected by the VM: %v", err)
	}
	out, err := vm.Run(c.bytes())
	if err != nil {
		t.Fatalf("VM: %v", err)
	}
	return verdict(uint32(out))
}

// filterCase is one system call and the filter's expected verdict.
type filterCase struct {
	name string
	c    call
	want string
}

func TestFilter(t *testing.T) {
	for goarch, a := range arches {
		sock := func(args ...uint64) call {
			c := call{arch: a.audit, nr: a.socket}
			copy(c.args[:], args)
			return c
		}
		sys := func(nr uint32, args ...uint64) call {
			c := call{arch: a.audit, nr: nr}
			copy(c.args[:], args)
			return c
		}
		cases := []filterCase{
			{"tcp4", sock(afInet, sockStream, 0), "allow"},
			{"tcp4 explicit protocol", sock(afInet, sockStream, ipprotoTCP), "allow"},
			{"tcp6 nonblock cloexec", sock(afInet6, sockStream|sockNonblock|sockCloexec, 0), "allow"},
			{"unix stream", sock(afUnix, sockStream, 0), "allow"},
			{"unix dgram", sock(afUnix, sockDgram, 0), "allow"},
			{"netlink route", sock(afNetlink, sockRaw|sockCloexec, 0), "allow"},
			{"udp4", sock(afInet, sockDgram, 0), "EPERM"},
			{"udp6 nonblock", sock(afInet6, sockDgram|sockNonblock, 0), "EPERM"},
			{"icmp ping socket", sock(afInet, sockDgram, ipprotoICMP), "EPERM"},
			{"raw", sock(afInet, sockRaw, ipprotoICMP), "EPERM"},
			{"seqpacket", sock(afInet, sockSeqpacket, 0), "EPERM"},
			{"mptcp", sock(afInet, sockStream, ipprotoMPTCP), "EPERM"},
			{"mptcp6", sock(afInet6, sockStream, ipprotoMPTCP), "EPERM"},
			{"sctp stream", sock(afInet, sockStream, ipprotoSCTP), "EPERM"},
			{"packet", sock(afPacket, sockRaw, 0x0300), "EPERM"},
			{"vsock", sock(afVsock, sockStream, 0), "EPERM"},
			// The kernel reads int arguments as 32 bits, and so does the
			// filter: a high half changes nothing either way.
			{"tcp4 with high garbage", sock(0xdead_0000_0000|afInet, 0xbeef_0000_0000|sockStream, 0x1_0000_0000), "allow"},
			{"packet with high garbage", sock(0x1_0000_0000|afPacket, sockRaw, 0), "EPERM"},
			{"udp with high garbage", sock(afInet, 0x1_0000_0000|sockDgram, 0), "EPERM"},
			{"io_uring_setup", sys(a.ioUringSetup, 4, 0), "EPERM"},
			{"sendto", sys(a.sendto, 3, 0, 10, msgNosignal, 0, 0), "allow"},
			{"sendto fastopen", sys(a.sendto, 3, 0, 10, msgFastopen, 0, 0), "EOPNOTSUPP"},
			{"sendto fastopen nosignal", sys(a.sendto, 3, 0, 10, msgFastopen|msgNosignal, 0, 0), "EOPNOTSUPP"},
			{"sendmsg", sys(a.sendmsg, 3, 0, msgDontwait), "allow"},
			{"sendmsg fastopen", sys(a.sendmsg, 3, 0, msgFastopen|msgDontwait), "EOPNOTSUPP"},
			{"sendmmsg", sys(a.sendmmsg, 3, 0, 2, 0), "allow"},
			{"sendmmsg fastopen", sys(a.sendmmsg, 3, 0, 2, msgFastopen), "EOPNOTSUPP"},
			{"sendmmsg flag in vlen is not flags", sys(a.sendmmsg, 3, 0, msgFastopen, 0), "allow"},
			{"other call", sys(a.socket+1000, afInet, sockDgram, 0), "allow"},
			{"foreign arch i386", call{arch: auditArchI386, nr: 359, args: [6]uint64{afInet, sockDgram}}, "kill"},
			{"foreign arch arm", call{arch: auditArchARM, nr: 281, args: [6]uint64{afInet, sockDgram}}, "kill"},
		}
		if a.x32 {
			cases = append(cases,
				filterCase{"x32 socket", sys(x32SyscallBit|a.socket, afInet, sockDgram, 0), "kill"},
				filterCase{"x32 read", sys(x32SyscallBit|sysRead, 0, 0, 0), "kill"},
				filterCase{"skipped by a tracer (-1)", sys(0xffffffff), "allow"},
			)
		}
		for _, tc := range cases {
			t.Run(goarch+"/"+tc.name, func(t *testing.T) {
				if got := verdictOf(t, goarch, tc.c); got != tc.want {
					t.Errorf("got %s, want %s", got, tc.want)
				}
			})
		}
	}
}

// TestFilterNativeNumbers pins a few numbers so that a typo in the table
// cannot make socket(2) unfiltered on one architecture.
func TestFilterNativeNumbers(t *testing.T) {
	if got := verdictOf(t, "amd64", call{arch: auditArchX86_64, nr: 41, args: [6]uint64{afInet, sockDgram}}); got != "EPERM" {
		t.Errorf("amd64 socket(AF_INET, SOCK_DGRAM): %s, want EPERM", got)
	}
	if got := verdictOf(t, "arm64", call{arch: auditArchAArch64, nr: sysSocketA64, args: [6]uint64{afInet, sockDgram}}); got != "EPERM" {
		t.Errorf("arm64 socket(AF_INET, SOCK_DGRAM): %s, want EPERM", got)
	}
	// The arch check is per table: amd64 numbers under the arm64 arch word
	// are not amd64 calls.
	if got := verdictOf(t, "amd64", call{arch: auditArchAArch64, nr: 41}); got != "kill" {
		t.Errorf("amd64 filter, aarch64 arch: %s, want kill", got)
	}
	if got := verdictOf(t, "amd64", call{arch: auditArchX86_64, nr: sysSocketpr, args: [6]uint64{afInet, sockStream}}); got != "allow" {
		t.Errorf("socketpair: %s, want allow", got)
	}
}

func TestFilterAssembles(t *testing.T) {
	for goarch := range arches {
		prog, err := TCPOnly(goarch)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := bpf.Assemble(prog)
		if err != nil {
			t.Fatalf("%s: %v", goarch, err)
		}
		// BPF_MAXINSNS; the program is a few dozen instructions.
		if len(raw) == 0 || len(raw) > 4096 {
			t.Errorf("%s: %d instructions", goarch, len(raw))
		}
	}
	if _, err := TCPOnly("riscv64"); err == nil {
		t.Error("riscv64: no error for an architecture without a table")
	}
}

func TestAsmErrors(t *testing.T) {
	var p asm
	p.jeq(1, "nowhere", "")
	if _, err := p.resolve(); err == nil {
		t.Error("jump to a missing label: no error")
	}
	var q asm
	q.label("back")
	q.emit(bpf.RetConstant{})
	q.jeq(1, "back", "")
	if _, err := q.resolve(); err == nil {
		t.Error("backward jump: no error")
	}
}
