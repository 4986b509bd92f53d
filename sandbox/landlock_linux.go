// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rulesetAttr is struct landlock_ruleset_attr up to ABI 6's scoped field.
type rulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

// LandlockABI is the kernel's Landlock ABI version, 0 when Landlock is
// missing or disabled.
func LandlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// Scopes are what a session's Landlock domain confines to the session,
// beyond ptrace, which every domain confines.
type Scopes struct {
	Signal       bool // kill, tgkill, pidfd_send_signal, SIGIO (ABI 6)
	AbstractUnix bool // connect/send to abstract unix sockets (ABI 6)
}

// RestrictSelf puts the calling thread (and what it execs and starts) in a
// new Landlock domain that handles no file or network access: its only
// effects are that ptrace, pidfd_getfd, process_vm_readv/writev, kcmp and
// /proc/PID/{mem,environ,fd,...} reach only processes in the domain, and,
// with ABI 6, the scopes asked for. The domain needs some handled right
// before ABI 6: it handles making block devices, which an unprivileged
// process cannot do anyway, so no file access changes. no_new_privs must
// be set. It returns the scopes the kernel could not apply (a kernel
// before ABI 6), for a notice.
func RestrictSelf(s Scopes) (missing []string, err error) {
	abi := LandlockABI()
	if abi < 1 {
		return nil, fmt.Errorf("sandbox: Landlock is not available (not built in or not in the lsm= list): the command could trace and read same-user processes outside its session")
	}
	attr := rulesetAttr{handledFS: unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK}
	size := unsafe.Sizeof(attr)
	if abi >= 6 {
		if s.Signal {
			attr.scoped |= unix.LANDLOCK_SCOPE_SIGNAL
		}
		if s.AbstractUnix {
			attr.scoped |= unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		}
	} else {
		size = unsafe.Offsetof(attr.scoped)
		if s.Signal {
			missing = append(missing, "signal scope (Landlock ABI 6, Linux 6.12)")
		}
		if s.AbstractUnix {
			missing = append(missing, "abstract unix socket scope (Landlock ABI 6, Linux 6.12)")
		}
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return missing, fmt.Errorf("sandbox: landlock_create_ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	// The shim execs the command next: without LOG_NEW_EXEC_ON (ABI 7,
	// Linux 6.15) the kernel would log none of the command's refusals,
	// and a session's owner reads them to explain them (package kaudit).
	// They are written only where the machine's audit is on.
	var flags uintptr
	if abi >= 7 {
		flags = unix.LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, flags, 0); errno != 0 {
		return missing, fmt.Errorf("sandbox: landlock_restrict_self: %w", errno)
	}
	return missing, nil
}
