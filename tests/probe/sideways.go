// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Sideways actions: what a confined agent can try against a process of the
// same user outside its session (issue 9). The tests run each one confined,
// where it must fail, and unconfined, where it must reach the world.

// runHold is the victim: it opens an unconnected UDP and an unconnected
// TCP socket, writes "PID UDPFD TCPFD" to OUTFILE and waits until the
// action's deadline (give it a long -timeout). A socket keeps the cgroup it
// was created in, so whoever takes one sends outside any session.
func runHold(args []string, r *result) error {
	udp, err := socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	tcp, err := socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("%d %d %d\n", os.Getpid(), udp, tcp)
	if err := os.WriteFile(args[0]+".tmp", []byte(line), 0o644); err != nil {
		return at("write", err)
	}
	if err := os.Rename(args[0]+".tmp", args[0]); err != nil {
		return at("write", err)
	}
	time.Sleep(time.Until(deadline) - 100*time.Millisecond)
	return nil
}

// runGetfd takes socket FD from process PID with pidfd_getfd and uses it:
// tcp connects to ADDR PORT and reads the greeting, udp sends a datagram
// there and waits for the echo.
func runGetfd(args []string, r *result) error {
	pid, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("PID %q: %w", args[0], err)
	}
	target, err := strconv.Atoi(args[1])
	if err != nil {
		return fmt.Errorf("FD %q: %w", args[1], err)
	}
	addr, port, err := parseAddrPort(args[3:])
	if err != nil {
		return err
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return at("pidfd_open", err)
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, target, 0)
	if err != nil {
		return at("pidfd_getfd", err)
	}
	defer unix.Close(fd)
	switch args[2] {
	case "tcp":
		if err := connect(fd, sockaddr(addr, port)); err != nil {
			return err
		}
		r.Reply, err = readLine(fd)
		return err
	case "udp":
		if err := unix.Sendto(fd, datagram, 0, sockaddr(addr, port)); err != nil {
			return at("sendto", err)
		}
		return awaitEcho(fd, r)
	}
	return fmt.Errorf("want tcp or udp, not %q", args[2])
}

// parsePIDAddr reads "PID ADDR" (ADDR in hex, as in /proc/PID/maps).
func parsePIDAddr(args []string) (int, uintptr, error) {
	pid, err := strconv.Atoi(args[0])
	if err != nil {
		return 0, 0, fmt.Errorf("PID %q: %w", args[0], err)
	}
	a, err := strconv.ParseUint(args[1], 16, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("ADDR %q (hex): %w", args[1], err)
	}
	return pid, uintptr(a), nil
}

// runVMWrite reads one byte at ADDR of process PID with process_vm_readv
// and writes it back with process_vm_writev: the write an injection needs,
// without changing the victim.
func runVMWrite(args []string, r *result) error {
	pid, addr, err := parsePIDAddr(args)
	if err != nil {
		return err
	}
	b := make([]byte, 1)
	local := []unix.Iovec{{Base: &b[0], Len: 1}}
	remote := []unix.RemoteIovec{{Base: addr, Len: 1}}
	if _, err := unix.ProcessVMReadv(pid, local, remote, 0); err != nil {
		return at("process_vm_readv", err)
	}
	if _, err := unix.ProcessVMWritev(pid, local, remote, 0); err != nil {
		return at("process_vm_writev", err)
	}
	return nil
}

// runMemWrite does what runVMWrite does through /proc/PID/mem.
func runMemWrite(args []string, r *result) error {
	pid, addr, err := parsePIDAddr(args)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_RDWR, 0)
	if err != nil {
		return at("open", err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, int64(addr)); err != nil {
		return at("pread", err)
	}
	if _, err := f.WriteAt(b, int64(addr)); err != nil {
		return at("pwrite", err)
	}
	return nil
}

// runSignal sends SIGCONT (harmless to a running process) to PID.
func runSignal(args []string, r *result) error {
	pid, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("PID %q: %w", args[0], err)
	}
	return at("kill", unix.Kill(pid, unix.SIGCONT))
}

// runPtraceInject attaches to PID and makes it run socket(AF_INET,
// SOCK_DGRAM) and sendto(ADDR:PORT) itself (ptrace_amd64.go): the datagram
// leaves from the victim's cgroup, which no session judges. Sent is what
// the victim's sendto returned.
func runPtraceInject(args []string, r *result) error {
	pid, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("PID %q: %w", args[0], err)
	}
	addr, port, err := parseAddrPort(args[1:])
	if err != nil {
		return err
	}
	if !addr.Is4() {
		return fmt.Errorf("ptrace-inject: IPv4 only")
	}
	n, err := injectSendto(pid, addr.As4(), port)
	r.Sent = n
	return err
}
