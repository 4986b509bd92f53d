// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rulesetAttr is struct landlock_ruleset_attr up to ABI 6's scoped field.
// The kernel reads the size it is given and treats the rest as zero, so a
// caller passes the prefix its kernel knows; the call does not change
// meaning when golang.org/x/sys grows its copy of the struct.
type rulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

// landlockRuleNetPort is LANDLOCK_RULE_NET_PORT; golang.org/x/sys/unix
// has neither it nor struct landlock_net_port_attr.
const landlockRuleNetPort = 2

// netPortAttr is struct landlock_net_port_attr (not packed, unlike the
// path-beneath one).
type netPortAttr struct {
	allowedAccess uint64
	port          uint64
}

// LandlockABI is the kernel's Landlock ABI version, 0 when Landlock is
// missing or disabled.
func LandlockABI() int {
	abi, _ := ProbeLandlock()
	return abi
}

// ProbeLandlock returns the kernel's Landlock ABI version, or why there
// is none.
func ProbeLandlock() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case errno == unix.ENOSYS:
		return 0, errors.New("the kernel has no Landlock (CONFIG_SECURITY_LANDLOCK) or a filter hides it")
	case errno == unix.EOPNOTSUPP:
		return 0, errors.New("the kernel has Landlock disabled at boot (add landlock to the lsm= kernel parameter)")
	case errno != 0:
		return 0, fmt.Errorf("asking the Landlock ABI version: %w", errno)
	}
	return int(v), nil
}

// RestrictConnect puts the calling thread (and what it execs and starts)
// in a Landlock domain whose only handled access is
// LANDLOCK_ACCESS_NET_CONNECT_TCP, with one rule per port: connect(2)
// over TCP reaches those ports only, on any address. It needs ABI 4
// (Linux 6.7) and no_new_privs.
func RestrictConnect(ports []uint16) error {
	attr := rulesetAttr{handledNet: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(&attr)), unsafe.Offsetof(attr.scoped), 0)
	if errno != 0 {
		return fmt.Errorf("landlock: creating the ruleset: %w", errno)
	}
	// The ruleset fd is close-on-exec already; closing it keeps it out of
	// an error path's way too.
	defer unix.Close(int(fd))
	for _, p := range ports {
		rule := netPortAttr{allowedAccess: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(p)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, landlockRuleNetPort,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		if errno != 0 {
			return fmt.Errorf("landlock: allowing TCP connect to port %d: %w", p, errno)
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock: enforcing the ruleset: %w", errno)
	}
	return nil
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
