// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// Linux UAPI values the filter is built from. They are spelled out here,
// not taken from golang.org/x/sys/unix, so that the filter can be assembled
// and tested on any OS (unix's values differ on other systems); a Linux test
// checks them against unix.
const (
	seccompRetKillProcess = 0x80000000
	seccompRetErrno       = 0x00050000
	seccompRetAllow       = 0x7fff0000

	auditArchX86_64  = 0xc000003e
	auditArchAArch64 = 0xc00000b7

	// x32SyscallBit marks x32 system calls, which arrive with
	// AUDIT_ARCH_X86_64 like native ones.
	x32SyscallBit = 0x40000000

	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16

	sockStream   = 1
	sockTypeMask = 0xf // the rest of the type argument is SOCK_NONBLOCK|SOCK_CLOEXEC
	ipprotoTCP   = 6

	msgFastopen = 0x20000000

	cloneNewUser = 0x10000000

	errnoEPERM        = 1
	errnoENOSYS       = 38
	errnoEOPNOTSUPP   = 95
	errnoEAFNOSUPPORT = 97
)

// Offsets into struct seccomp_data { int nr; __u32 arch; __u64
// instruction_pointer; __u64 args[6]; }. Arguments are read by their low
// 32-bit half, which comes first on the little-endian architectures below.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// argLow is the offset of the low half of system call argument i.
func argLow(i int) uint32 { return uint32(offArgs + 8*i) }

// arch is one native system call ABI the filter knows.
type arch struct {
	audit uint32 // AUDIT_ARCH_* that seccomp_data.arch must equal
	x32   bool   // reject numbers with x32SyscallBit (amd64)

	socket, sendto, sendmsg, sendmmsg, ioUringSetup uint32
	clone, unshare, clone3                          uint32
}

// arches maps GOARCH to its system call numbers (asm/unistd_64.h and
// asm-generic/unistd.h).
var arches = map[string]arch{
	"amd64": {audit: auditArchX86_64, x32: true,
		socket: 41, sendto: 44, sendmsg: 46, sendmmsg: 307, ioUringSetup: 425,
		clone: 56, unshare: 272, clone3: 435},
	"arm64": {audit: auditArchAArch64,
		socket: 198, sendto: 206, sendmsg: 211, sendmmsg: 269, ioUringSetup: 425,
		clone: 220, unshare: 97, clone3: 435},
}

// archOf returns the table of goarch.
func archOf(goarch string) (arch, error) {
	a, ok := arches[goarch]
	if !ok {
		return arch{}, fmt.Errorf("seccomp: no filter for GOARCH %s (only amd64 and arm64)", goarch)
	}
	return a, nil
}

// TCPOnly returns Landlock mode's program for goarch (see the package
// documentation for what it allows and why): Landlock governs TCP connects
// only, so every other way onto the network is refused here.
func TCPOnly(goarch string) ([]bpf.Instruction, error) {
	a, err := archOf(goarch)
	if err != nil {
		return nil, err
	}
	return a.tcpOnly()
}

// tcpOnly assembles the filter for a. Jumps name labels; the assembler
// turns them into the relative offsets classic BPF wants.
func (a arch) tcpOnly() ([]bpf.Instruction, error) {
	var p asm
	p.load(offArch)
	p.jeq(a.audit, "", "kill")
	p.load(offNr)
	if a.x32 {
		p.jge(x32SyscallBit, "x32", "")
	}
	p.jeq(a.socket, "socket", "")
	p.jeq(a.ioUringSetup, "eperm", "")
	p.jeq(a.sendto, "flags3", "")
	p.jeq(a.sendmmsg, "flags3", "")
	p.jeq(a.sendmsg, "flags2", "allow")

	// sendto(fd, buf, len, flags, ...), sendmmsg(fd, vec, vlen, flags).
	p.label("flags3")
	p.load(argLow(3))
	p.jset(msgFastopen, "eopnotsupp", "allow")
	// sendmsg(fd, msg, flags).
	p.label("flags2")
	p.load(argLow(2))
	p.jset(msgFastopen, "eopnotsupp", "allow")

	// socket(family, type, protocol).
	p.label("socket")
	p.load(argLow(0))
	p.jeq(afUnix, "allow", "")
	p.jeq(afNetlink, "allow", "")
	p.jeq(afInet, "inet", "")
	p.jeq(afInet6, "inet", "eperm")
	p.label("inet")
	p.load(argLow(1))
	p.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: sockTypeMask})
	p.jeq(sockStream, "", "eperm")
	p.load(argLow(2))
	p.jeq(0, "allow", "")
	p.jeq(ipprotoTCP, "allow", "eperm")

	if a.x32 {
		// -1 is no system call at all: what a tracer writes to skip one.
		p.label("x32")
		p.jeq(0xffffffff, "allow", "kill")
	}

	p.label("allow")
	p.emit(bpf.RetConstant{Val: seccompRetAllow})
	p.label("eperm")
	p.emit(bpf.RetConstant{Val: seccompRetErrno | errnoEPERM})
	p.label("eopnotsupp")
	p.emit(bpf.RetConstant{Val: seccompRetErrno | errnoEOPNOTSUPP})
	p.label("kill")
	p.emit(bpf.RetConstant{Val: seccompRetKillProcess})
	return p.resolve()
}

// asm collects instructions whose conditional jumps name labels.
type asm struct {
	ins    []bpf.Instruction
	labels map[string]int
	jumps  []jump
}

// jump is a conditional jump waiting for its labels ("" = next
// instruction).
type jump struct {
	at              int
	cond            bpf.JumpTest
	val             uint32
	ifTrue, ifFalse string
}

func (p *asm) emit(i bpf.Instruction) { p.ins = append(p.ins, i) }

// load loads the 32-bit word at off of seccomp_data into A.
func (p *asm) load(off uint32) { p.emit(bpf.LoadAbsolute{Off: off, Size: 4}) }

func (p *asm) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.ins)
}

func (p *asm) cond(c bpf.JumpTest, v uint32, t, f string) {
	p.jumps = append(p.jumps, jump{at: len(p.ins), cond: c, val: v, ifTrue: t, ifFalse: f})
	p.emit(nil) // placeholder, filled in by resolve
}

func (p *asm) jeq(v uint32, t, f string)  { p.cond(bpf.JumpEqual, v, t, f) }
func (p *asm) jge(v uint32, t, f string)  { p.cond(bpf.JumpGreaterOrEqual, v, t, f) }
func (p *asm) jset(v uint32, t, f string) { p.cond(bpf.JumpBitsSet, v, t, f) }

// resolve fills in the jumps. Classic BPF only jumps forward, at most 255
// instructions.
func (p *asm) resolve() ([]bpf.Instruction, error) {
	skip := func(from int, label string) (uint8, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := p.labels[label]
		if !ok {
			return 0, fmt.Errorf("seccomp: program: no label %q", label)
		}
		d := to - from - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("seccomp: program: jump from %d to %q (%d) out of range", from, label, to)
		}
		return uint8(d), nil
	}
	for _, j := range p.jumps {
		t, err := skip(j.at, j.ifTrue)
		if err != nil {
			return nil, err
		}
		f, err := skip(j.at, j.ifFalse)
		if err != nil {
			return nil, err
		}
		p.ins[j.at] = bpf.JumpIf{Cond: j.cond, Val: j.val, SkipTrue: t, SkipFalse: f}
	}
	return p.ins, nil
}
