// SPDX-License-Identifier: Apache-2.0

package kaudit

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// NativeArch is this machine's AUDIT_ARCH_* for the architecture sluice
// was built for (0 where this package does not know it).
func NativeArch() uint64 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

// NativeNames names the system calls through which a session reaches
// sideways, in the native numbering.
func NativeNames() map[uint64]string {
	return map[uint64]string{
		unix.SYS_PTRACE:            "ptrace",
		unix.SYS_PIDFD_GETFD:       "pidfd_getfd",
		unix.SYS_PIDFD_OPEN:        "pidfd_open",
		unix.SYS_PROCESS_VM_READV:  "process_vm_readv",
		unix.SYS_PROCESS_VM_WRITEV: "process_vm_writev",
		unix.SYS_KCMP:              "kcmp",
		unix.SYS_PERF_EVENT_OPEN:   "perf_event_open",
		unix.SYS_KILL:              "kill",
		unix.SYS_TKILL:             "tkill",
		unix.SYS_TGKILL:            "tgkill",
		unix.SYS_PIDFD_SEND_SIGNAL: "pidfd_send_signal",
		unix.SYS_RT_SIGQUEUEINFO:   "rt_sigqueueinfo",
		unix.SYS_RT_TGSIGQUEUEINFO: "rt_tgsigqueueinfo",
		unix.SYS_FCNTL:             "fcntl",
		unix.SYS_OPENAT:            "openat",
		unix.SYS_GETDENTS64:        "getdents64",
		unix.SYS_OPENAT2:           "openat2",
		unix.SYS_READLINKAT:        "readlinkat",
		unix.SYS_CONNECT:           "connect",
		unix.SYS_SENDTO:            "sendto",
		unix.SYS_SENDMSG:           "sendmsg",
	}
}
