// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A minimal io_uring, by hand, to submit one IORING_OP_CONNECT: the connect
// then happens in io_uring's worker context rather than in connect(2), which
// is exactly the path a confinement must not miss. No liburing, no cgo.
//
// The layouts below are those of include/uapi/linux/io_uring.h. They are the
// same on amd64 and arm64 (naturally aligned fixed-width fields, no pointers);
// the size checks under each type fail the build if that ever stops holding.

// Constants from include/uapi/linux/io_uring.h.
const (
	ioringOffSQRing = 0
	ioringOffCQRing = 0x8000000
	ioringOffSQEs   = 0x10000000

	ioringFeatSingleMmap = 1 << 0
	ioringFeatExtArg     = 1 << 8

	ioringEnterGetevents = 1 << 0
	ioringEnterExtArg    = 1 << 3

	ioringOpConnect = 16
)

// ioSQRingOffsets is struct io_sqring_offsets: byte offsets of the
// submission ring's fields within its mmap.
type ioSQRingOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

// ioCQRingOffsets is struct io_cqring_offsets.
type ioCQRingOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, CQEs, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

// ioUringParams is struct io_uring_params (120 bytes), filled in by
// io_uring_setup(2).
type ioUringParams struct {
	SQEntries, CQEntries, Flags, SQThreadCPU, SQThreadIdle, Features, WQFd uint32
	Resv                                                                   [3]uint32
	SQOff                                                                  ioSQRingOffsets
	CQOff                                                                  ioCQRingOffsets
}

// ioUringSQE is struct io_uring_sqe (64 bytes). For IORING_OP_CONNECT, Addr
// points at the sockaddr and Off holds its length.
type ioUringSQE struct {
	Opcode      uint8
	Flags       uint8
	IOPrio      uint16
	Fd          int32
	Off         uint64 // union with addr2
	Addr        uint64 // union with splice_off_in
	Len         uint32
	OpFlags     uint32 // union of the per-op flags
	UserData    uint64
	BufIndex    uint16 // union with buf_group
	Personality uint16
	SpliceFdIn  int32 // union with file_index
	Addr3       uint64
	_           uint64
}

// ioUringCQE is struct io_uring_cqe (16 bytes, without CQE32). Res is the
// operation's return value: a negative errno on failure.
type ioUringCQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// ioUringGeteventsArg is struct io_uring_getevents_arg, passed with
// IORING_ENTER_EXT_ARG to bound the wait.
type ioUringGeteventsArg struct {
	Sigmask     uint64
	SigmaskSz   uint32
	MinWaitUsec uint32
	TS          uint64 // pointer to struct __kernel_timespec
}

// kernelTimespec is struct __kernel_timespec.
type kernelTimespec struct{ Sec, Nsec int64 }

// Compile-time layout checks: an index out of range if a size is wrong.
var (
	_ = [1]int{}[unsafe.Sizeof(ioUringParams{})-120]
	_ = [1]int{}[unsafe.Sizeof(ioUringSQE{})-64]
	_ = [1]int{}[unsafe.Sizeof(ioUringCQE{})-16]
	_ = [1]int{}[unsafe.Sizeof(ioUringGeteventsArg{})-24]
)

// connectUserData tags our SQE so the CQE can be matched.
const connectUserData = 0x5e1ce

// runIOURing connects through io_uring and, on success, reads the greeting
// with ordinary read(2). The CQE's result is the connect outcome (stage
// "connect"); setup failures have their own stages.
func runIOURing(args []string, r *result) error {
	addr, port, err := parseAddrPort(args)
	if err != nil {
		return err
	}
	fd, err := socket(family(addr), unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)

	ring, err := newRing()
	if err != nil {
		return err
	}
	defer ring.close()

	sa, salen := rawSockaddr(addr, port)
	res, err := ring.submitAndWait(ioUringSQE{
		Opcode:   ioringOpConnect,
		Fd:       int32(fd),
		Addr:     uint64(uintptr(sa)),
		Off:      uint64(salen),
		UserData: connectUserData,
	})
	// The kernel copies the sockaddr while preparing the request, which
	// io_uring_enter has done by the time it returns.
	runtime.KeepAlive(sa)
	if err != nil {
		return err
	}
	switch {
	case res == -int32(unix.EINPROGRESS) || res == -int32(unix.EALREADY):
		// Possible on old kernels for non-blocking sockets.
		if err := finishConnect(fd); err != nil {
			return at("connect", err)
		}
	case res < 0:
		return at("connect", unix.Errno(-res))
	}
	r.Reply, err = readLine(fd)
	return err
}

// uring is a mapped io_uring instance with room for one request in flight.
type uring struct {
	fd       int
	params   ioUringParams
	sqRing   []byte
	cqRing   []byte // aliases sqRing with IORING_FEAT_SINGLE_MMAP
	sqes     []byte
	extArg   bool
	unmapped [][]byte
}

// newRing sets up a small ring and maps it.
func newRing() (*uring, error) {
	u := &uring{fd: -1}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&u.params)), 0)
	if errno != 0 {
		// EPERM here usually means kernel.io_uring_disabled, not sluice.
		return nil, at("io_uring_setup", errno)
	}
	u.fd = int(fd)
	p := &u.params
	u.extArg = p.Features&ioringFeatExtArg != 0

	sqSize := int(p.SQOff.Array + p.SQEntries*4)
	cqSize := int(p.CQOff.CQEs + p.CQEntries*uint32(unsafe.Sizeof(ioUringCQE{})))
	single := p.Features&ioringFeatSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	if u.sqRing, err = u.mmap(ioringOffSQRing, sqSize); err != nil {
		u.close()
		return nil, err
	}
	u.cqRing = u.sqRing
	if !single {
		if u.cqRing, err = u.mmap(ioringOffCQRing, cqSize); err != nil {
			u.close()
			return nil, err
		}
	}
	if u.sqes, err = u.mmap(ioringOffSQEs, int(p.SQEntries)*int(unsafe.Sizeof(ioUringSQE{}))); err != nil {
		u.close()
		return nil, err
	}
	return u, nil
}

func (u *uring) mmap(off int64, size int) ([]byte, error) {
	b, err := unix.Mmap(u.fd, off, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, at("mmap", fmt.Errorf("io_uring offset %#x: %w", off, err))
	}
	u.unmapped = append(u.unmapped, b)
	return b, nil
}

func (u *uring) close() {
	for _, b := range u.unmapped {
		_ = unix.Munmap(b)
	}
	if u.fd >= 0 {
		_ = unix.Close(u.fd)
	}
}

// word returns a pointer to the ring field at byte offset off.
func word(ring []byte, off uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&ring[off]))
}

// submitAndWait queues sqe, submits it and waits (bounded by the deadline)
// for its completion; it returns the CQE's res.
func (u *uring) submitAndWait(sqe ioUringSQE) (int32, error) {
	p := &u.params
	tail := atomic.LoadUint32(word(u.sqRing, p.SQOff.Tail))
	idx := tail & *word(u.sqRing, p.SQOff.RingMask)
	*(*ioUringSQE)(unsafe.Pointer(&u.sqes[uintptr(idx)*unsafe.Sizeof(sqe)])) = sqe
	*word(u.sqRing, p.SQOff.Array+idx*4) = idx
	// The kernel reads the tail with acquire semantics; Go's atomic store is
	// sequentially consistent, which is at least a release.
	atomic.StoreUint32(word(u.sqRing, p.SQOff.Tail), tail+1)

	toSubmit := uintptr(1)
	for {
		if res, ok := u.reap(); ok {
			return res, nil
		}
		if err := u.enter(toSubmit); err != nil {
			return 0, err
		}
		toSubmit = 0
	}
}

// enter calls io_uring_enter(2), waiting for one completion until the
// deadline when the kernel supports a timeout (IORING_FEAT_EXT_ARG); else
// the watchdog bounds the wait.
func (u *uring) enter(toSubmit uintptr) error {
	left := time.Until(deadline)
	if left <= 0 {
		return at("io_uring_enter", errTimeout())
	}
	flags := uintptr(ioringEnterGetevents)
	var arg ioUringGeteventsArg
	ts := kernelTimespec{Sec: int64(left / 1e9), Nsec: int64(left % 1e9)}
	argp, argsz := uintptr(0), uintptr(0)
	if u.extArg {
		flags |= ioringEnterExtArg
		arg.TS = uint64(uintptr(unsafe.Pointer(&ts)))
		argp, argsz = uintptr(unsafe.Pointer(&arg)), unsafe.Sizeof(arg)
	}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(u.fd), toSubmit, 1, flags, argp, argsz)
	runtime.KeepAlive(&ts)
	switch {
	case errno == 0, errno == unix.EINTR:
		return nil
	case errno == unix.ETIME:
		return at("io_uring_enter", errTimeout())
	default:
		return at("io_uring_enter", errno)
	}
}

// reap takes one completion off the CQ ring, if there is one.
func (u *uring) reap() (int32, bool) {
	p := &u.params
	head := atomic.LoadUint32(word(u.cqRing, p.CQOff.Head))
	for head != atomic.LoadUint32(word(u.cqRing, p.CQOff.Tail)) {
		idx := head & *word(u.cqRing, p.CQOff.RingMask)
		cqe := *(*ioUringCQE)(unsafe.Pointer(&u.cqRing[uintptr(p.CQOff.CQEs)+uintptr(idx)*unsafe.Sizeof(ioUringCQE{})]))
		head++
		atomic.StoreUint32(word(u.cqRing, p.CQOff.Head), head)
		if cqe.UserData == connectUserData {
			return cqe.Res, true
		}
	}
	return 0, false
}
