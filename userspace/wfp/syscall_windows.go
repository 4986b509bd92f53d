// SPDX-License-Identifier: Apache-2.0

//go:build sluice_wfp && (amd64 || arm64)

package wfp

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// fwpuclnt.dll is the user-mode WFP management API. Its functions return a
// Win32 error code (0 on success) instead of setting the last error.
var (
	fwpuclnt                   = windows.NewLazySystemDLL("fwpuclnt.dll")
	procFwpmEngineOpen0        = fwpuclnt.NewProc("FwpmEngineOpen0")
	procFwpmEngineClose0       = fwpuclnt.NewProc("FwpmEngineClose0")
	procFwpmTransactionBegin0  = fwpuclnt.NewProc("FwpmTransactionBegin0")
	procFwpmTransactionCommit0 = fwpuclnt.NewProc("FwpmTransactionCommit0")
	procFwpmTransactionAbort0  = fwpuclnt.NewProc("FwpmTransactionAbort0")
	procFwpmSubLayerAdd0       = fwpuclnt.NewProc("FwpmSubLayerAdd0")
	procFwpmFilterAdd0         = fwpuclnt.NewProc("FwpmFilterAdd0")
)

// result turns a returned Win32 error code into an error naming the call.
func result(name string, r uintptr) error {
	if r != 0 {
		return fmt.Errorf("wfp: %s: %w", name, windows.Errno(r))
	}
	return nil
}

// load resolves every procedure up front, so that a missing one is an
// error and never a panic half-way through a transaction.
func load() error {
	for _, p := range []*windows.LazyProc{procFwpmEngineOpen0, procFwpmEngineClose0, procFwpmTransactionBegin0,
		procFwpmTransactionCommit0, procFwpmTransactionAbort0, procFwpmSubLayerAdd0, procFwpmFilterAdd0} {
		if err := p.Find(); err != nil {
			return fmt.Errorf("wfp: %w", err)
		}
	}
	return nil
}

func fwpmEngineOpen0(session *fwpmSession0, handle *windows.Handle) error {
	r, _, _ := syscall.SyscallN(procFwpmEngineOpen0.Addr(), 0, rpcCAuthnDefault, 0,
		uintptr(unsafe.Pointer(session)), uintptr(unsafe.Pointer(handle)))
	return result("FwpmEngineOpen0", r)
}

func fwpmEngineClose0(handle windows.Handle) error {
	r, _, _ := syscall.SyscallN(procFwpmEngineClose0.Addr(), uintptr(handle))
	return result("FwpmEngineClose0", r)
}

func fwpmTransactionBegin0(handle windows.Handle) error {
	r, _, _ := syscall.SyscallN(procFwpmTransactionBegin0.Addr(), uintptr(handle), 0)
	return result("FwpmTransactionBegin0", r)
}

func fwpmTransactionCommit0(handle windows.Handle) error {
	r, _, _ := syscall.SyscallN(procFwpmTransactionCommit0.Addr(), uintptr(handle))
	return result("FwpmTransactionCommit0", r)
}

func fwpmTransactionAbort0(handle windows.Handle) error {
	r, _, _ := syscall.SyscallN(procFwpmTransactionAbort0.Addr(), uintptr(handle))
	return result("FwpmTransactionAbort0", r)
}

func fwpmSubLayerAdd0(handle windows.Handle, sublayer *fwpmSublayer0) error {
	r, _, _ := syscall.SyscallN(procFwpmSubLayerAdd0.Addr(), uintptr(handle), uintptr(unsafe.Pointer(sublayer)), 0)
	return result("FwpmSubLayerAdd0", r)
}

func fwpmFilterAdd0(handle windows.Handle, filter *fwpmFilter0, id *uint64) error {
	r, _, _ := syscall.SyscallN(procFwpmFilterAdd0.Addr(), uintptr(handle), uintptr(unsafe.Pointer(filter)), 0,
		uintptr(unsafe.Pointer(id)))
	return result("FwpmFilterAdd0", r)
}
