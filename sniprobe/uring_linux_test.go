// SPDX-License-Identifier: Apache-2.0

package sniprobe

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// uringParams is struct io_uring_params.
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  [8]uint32
	sqUserAddr                                                             uint64
	cqOff                                                                  [8]uint32
	cqUserAddr                                                             uint64
}

// uringSend sends b on fd with one IORING_OP_SEND, the kernel's own
// submission path rather than a send system call of the process's.
func uringSend(fd int, b []byte) (int, error) {
	const opSend = 26
	var p uringParams
	rfd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return 0, fmt.Errorf("io_uring_setup: %w", e)
	}
	defer unix.Close(int(rfd))
	sqSize := int(p.sqOff[6]) + int(p.sqEntries)*4
	cqSize := int(p.cqOff[5]) + int(p.cqEntries)*16
	ringSize := max(sqSize, cqSize) // IORING_FEAT_SINGLE_MMAP
	ring, err := unix.Mmap(int(rfd), 0, ringSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, fmt.Errorf("mmap rings: %w", err)
	}
	defer unix.Munmap(ring)
	sqes, err := unix.Mmap(int(rfd), 0x10000000, int(p.sqEntries)*64, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, fmt.Errorf("mmap sqes: %w", err)
	}
	defer unix.Munmap(sqes)
	u32 := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&ring[off])) }
	sqe := sqes[:64]
	clear(sqe)
	sqe[0] = opSend
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(fd)
	*(*uint64)(unsafe.Pointer(&sqe[16])) = uint64(uintptr(unsafe.Pointer(&b[0])))
	*(*uint32)(unsafe.Pointer(&sqe[24])) = uint32(len(b))
	tail := atomic.LoadUint32(u32(p.sqOff[1]))
	mask := *u32(p.sqOff[2])
	*u32(p.sqOff[6] + (tail&mask)*4) = 0
	atomic.StoreUint32(u32(p.sqOff[1]), tail+1)
	const enterGetEvents = 1
	if _, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, rfd, 1, 1, enterGetEvents, 0, 0); e != 0 {
		return 0, fmt.Errorf("io_uring_enter: %w", e)
	}
	head := atomic.LoadUint32(u32(p.cqOff[0]))
	if atomic.LoadUint32(u32(p.cqOff[1])) == head {
		return 0, fmt.Errorf("io_uring: no completion")
	}
	cmask := *u32(p.cqOff[2])
	res := *(*int32)(unsafe.Pointer(&ring[p.cqOff[5]+(head&cmask)*16+8]))
	atomic.StoreUint32(u32(p.cqOff[0]), head+1)
	if res < 0 {
		return 0, unix.Errno(-res)
	}
	return int(res), nil
}
