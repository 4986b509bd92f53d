// SPDX-License-Identifier: Apache-2.0

package landlock

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// minABI is the first Landlock ABI with network rules (Linux 6.7).
const minABI = 4

// landlockRuleNetPort is LANDLOCK_RULE_NET_PORT; golang.org/x/sys/unix
// has neither it nor struct landlock_net_port_attr.
const landlockRuleNetPort = 2

// rulesetAttr is the ABI 4 prefix of struct landlock_ruleset_attr; the
// kernel reads the fields it is given and treats the rest as zero.
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
}

// netPortAttr is struct landlock_net_port_attr (not packed, unlike the
// path-beneath one).
type netPortAttr struct {
	allowedAccess uint64
	port          uint64
}

// ABI returns the kernel's Landlock ABI version.
func ABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case errno == unix.ENOSYS:
		return 0, errors.New("landlock: the kernel has no Landlock (CONFIG_SECURITY_LANDLOCK) or a filter hides it")
	case errno == unix.EOPNOTSUPP:
		return 0, errors.New("landlock: Landlock is disabled at boot (add landlock to the lsm= kernel parameter)")
	case errno != 0:
		return 0, fmt.Errorf("landlock: asking the ABI version: %w", errno)
	}
	return int(v), nil
}

// Available returns nil when Exec can confine a command here: Landlock
// with network rules, a seccomp filter for this architecture, and the
// seccomp actions it uses. Otherwise the error says what is missing, for
// `sluice check` and for choosing a mode.
func Available() error {
	if _, err := filterProgram(runtime.GOARCH); err != nil {
		return err
	}
	abi, err := ABI()
	if err != nil {
		return err
	}
	if abi < minABI {
		return fmt.Errorf("landlock: ABI %d has no network rules (needs ABI %d, Linux 6.7 or later)", abi, minABI)
	}
	for _, action := range []uint32{seccompRetKillProcess, seccompRetErrno, seccompRetAllow} {
		_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
		if errno != 0 {
			return fmt.Errorf("landlock: seccomp action %#x is not available: %w", action, errno)
		}
	}
	return nil
}

// Exec confines the calling process and replaces it with argv[0] (looked up
// on env's PATH), run with argv and env: no_new_privs, a Landlock ruleset
// that lets connect(2) reach only rules.ConnectPorts over TCP, then the
// seccomp filter, then execve. It returns only on error; an error after
// confinement began leaves the calling thread confined (see the package
// documentation), so the caller should exit.
func Exec(rules Rules, argv []string, env []string) error {
	ports, err := rules.ports()
	if err != nil {
		return err
	}
	if len(argv) == 0 {
		return errors.New("landlock: no command")
	}
	path, err := lookPath(argv[0], env)
	if err != nil {
		return err
	}
	filter, err := seccompFilter(runtime.GOARCH)
	if err != nil {
		return err
	}
	abi, err := ABI()
	if err != nil {
		return err
	}
	if abi < minABI {
		return fmt.Errorf("landlock: ABI %d has no network rules (needs %d): refusing to run %s unconfined", abi, minABI, argv[0])
	}

	// Never unlocked: from here on this thread carries the confinement that
	// execve hands to the command.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("landlock: setting no_new_privs: %w", err)
	}
	if err := restrictSelf(ports); err != nil {
		return err
	}
	if err := installFilter(filter); err != nil {
		return err
	}
	if err := unix.Exec(path, argv, env); err != nil {
		return fmt.Errorf("landlock: executing %s: %w", path, err)
	}
	return nil
}

// restrictSelf applies a ruleset that handles TCP connect and allows it to
// ports, to the calling thread.
func restrictSelf(ports []uint16) error {
	attr := rulesetAttr{handledAccessNet: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
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
