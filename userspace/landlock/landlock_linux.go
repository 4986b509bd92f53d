// SPDX-License-Identifier: Apache-2.0

package landlock

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/sandbox"
	"github.com/sluice-dev/sluice/sandbox/seccomp"
)

// minABI is the first Landlock ABI with network rules (Linux 6.7).
const minABI = 4

// ABI returns the kernel's Landlock ABI version.
func ABI() (int, error) {
	abi, err := sandbox.ProbeLandlock()
	if err != nil {
		return 0, fmt.Errorf("landlock: %w", err)
	}
	return abi, nil
}

// Available returns nil when Exec can confine a command here: Landlock
// with network rules, a seccomp filter for this architecture, and the
// seccomp actions it uses. Otherwise the error says what is missing, for
// `sluice check` and for choosing a mode.
func Available() error {
	if _, err := seccomp.TCPOnly(runtime.GOARCH); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	abi, err := ABI()
	if err != nil {
		return err
	}
	if abi < minABI {
		return fmt.Errorf("landlock: ABI %d has no network rules (needs ABI %d, Linux 6.7 or later)", abi, minABI)
	}
	if err := seccomp.ActionsAvailable(); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// Exec confines the calling process and replaces it with argv[0] (looked up
// on env's PATH), run with argv and env: no_new_privs, a Landlock ruleset
// that lets connect(2) reach only rules.ConnectPorts over TCP
// (sandbox.RestrictConnect), then the seccomp filter (seccomp.TCPOnly),
// then execve. It returns only on error; an error after confinement began
// leaves the calling thread confined (see the package documentation), so
// the caller should exit.
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
	prog, err := seccomp.TCPOnly(runtime.GOARCH)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	filter, err := seccomp.Assemble(prog)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
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
	if err := sandbox.RestrictConnect(ports); err != nil {
		return err
	}
	if err := seccomp.Install(filter); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := unix.Exec(path, argv, env); err != nil {
		return fmt.Errorf("landlock: executing %s: %w", path, err)
	}
	return nil
}
