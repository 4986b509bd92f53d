// SPDX-License-Identifier: Apache-2.0

//go:build linux && amd64

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// injectSendto is runPtraceInject's work on amd64: attach, then for each
// injected call put a syscall instruction at the stopped thread's ip, set
// the registers, single-step, read rax; finally restore the code, the
// scratch memory below the red zone and the registers (re-running the
// system call the victim was in), and detach.
func injectSendto(pid int, ip4 [4]byte, port uint16) (int, error) {
	runtime.LockOSThread() // every ptrace request must come from the tracer thread
	defer runtime.UnlockOSThread()
	if err := unix.PtraceAttach(pid); err != nil {
		return 0, at("ptrace", err)
	}
	detached := false
	defer func() {
		if !detached {
			_ = unix.PtraceDetach(pid)
		}
	}()
	if err := waitStopped(pid); err != nil {
		return 0, at("wait", err)
	}
	var saved unix.PtraceRegs
	if err := unix.PtraceGetRegs(pid, &saved); err != nil {
		return 0, at("getregs", err)
	}
	code := uintptr(saved.Rip)
	scratch := uintptr((saved.Rsp - 1024) &^ 15)
	origCode, err := peek(pid, code, 8)
	if err != nil {
		return 0, err
	}
	payload := make([]byte, 16, 16+len(datagram))
	binary.LittleEndian.PutUint16(payload[0:], unix.AF_INET)
	binary.BigEndian.PutUint16(payload[2:], port)
	copy(payload[4:8], ip4[:])
	payload = append(payload, datagram...)
	origScratch, err := peek(pid, scratch, len(payload))
	if err != nil {
		return 0, err
	}
	inst := append([]byte{0x0f, 0x05}, origCode[2:]...) // syscall
	if _, err := unix.PtracePokeData(pid, code, inst); err != nil {
		return 0, at("poketext", err)
	}
	if _, err := unix.PtracePokeData(pid, scratch, payload); err != nil {
		return 0, at("pokedata", err)
	}
	call := func(nr uint64, a ...uint64) (int64, error) {
		regs := saved
		regs.Rip, regs.Rax, regs.Orig_rax = uint64(code), nr, ^uint64(0)
		a = append(a, 0, 0, 0, 0, 0, 0)
		regs.Rdi, regs.Rsi, regs.Rdx, regs.R10, regs.R8, regs.R9 = a[0], a[1], a[2], a[3], a[4], a[5]
		if err := unix.PtraceSetRegs(pid, &regs); err != nil {
			return 0, at("setregs", err)
		}
		if err := unix.PtraceSingleStep(pid); err != nil {
			return 0, at("singlestep", err)
		}
		if err := waitStopped(pid); err != nil {
			return 0, at("wait", err)
		}
		if err := unix.PtraceGetRegs(pid, &regs); err != nil {
			return 0, at("getregs", err)
		}
		return int64(regs.Rax), nil
	}
	sent := 0
	fd, err := call(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err == nil && fd < 0 {
		err = at("injected socket", syscall.Errno(-fd))
	}
	if err == nil {
		var n int64
		n, err = call(unix.SYS_SENDTO, uint64(fd), uint64(scratch+16), uint64(len(datagram)), 0, uint64(scratch), 16)
		if err == nil && n < 0 {
			err = at("injected sendto", syscall.Errno(-n))
		}
		sent = int(max(n, 0))
		if _, cerr := call(unix.SYS_CLOSE, uint64(fd)); err == nil {
			err = cerr
		}
	}
	// Put everything back; the victim goes on with its system call.
	_, perr1 := unix.PtracePokeData(pid, code, origCode)
	_, perr2 := unix.PtracePokeData(pid, scratch, origScratch)
	restore := saved
	if int64(saved.Orig_rax) >= 0 {
		restore.Rip -= 2
		restore.Rax = saved.Orig_rax
	}
	serr := unix.PtraceSetRegs(pid, &restore)
	derr := unix.PtraceDetach(pid)
	detached = true
	if err == nil {
		err = errors.Join(perr1, perr2, serr, derr)
	}
	return sent, err
}

func peek(pid int, addr uintptr, n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := unix.PtracePeekData(pid, addr, b); err != nil {
		return nil, at("peekdata", err)
	}
	return b, nil
}

// waitStopped waits until the tracee stops.
func waitStopped(pid int) error {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if ws.Stopped() {
			return nil
		}
		if ws.Exited() || ws.Signaled() {
			return fmt.Errorf("the tracee ended (%v)", ws)
		}
	}
}
