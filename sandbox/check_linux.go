// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Check reports the sandbox's layers on this machine. Process isolation
// needs Landlock (ABI 6 for its scopes) and a mount namespace with a
// private /proc; path hiding needs the mount namespace and the new mount
// API (Linux 5.12 for mount_setattr). As root it tries both for real, on a
// thread of its own that is thrown away; otherwise it can only report
// Landlock.
func Check() []Layer {
	abi := LandlockABI()
	mountErr, hideErr := probeMounts()
	proc := Layer{Name: "process isolation"}
	switch {
	case abi < 1:
		proc.Level, proc.Detail = Missing, "no Landlock: a session could trace, read and signal its user's other processes; sessions refuse to start unless they opt out of process isolation"
		proc.Fix = "a kernel >= 5.13 booted with landlock in lsm= (>= 6.12 for signal and abstract-socket scopes)"
	case mountErr != nil:
		proc.Level, proc.Detail = Missing, "a private /proc cannot be mounted: "+mountErr.Error()
		proc.Fix = "run as root, outside a container that forbids mounting proc"
	case abi < 6:
		proc.Level = Partial
		proc.Detail = fmt.Sprintf("Landlock ABI %d confines ptrace, pidfd_getfd, process_vm_* and /proc/PID/mem to the session, and /proc shows only it; signals and abstract unix sockets are NOT scoped (ABI 6)", abi)
		proc.Fix = "Linux >= 6.12 (Landlock ABI 6)"
	default:
		proc.Level = Full
		proc.Detail = fmt.Sprintf("Landlock ABI %d: ptrace, pidfd_getfd, process_vm_*, /proc/PID/mem and signals reach only the session (and abstract unix sockets, where the datapath does not judge unix sockets); /proc shows only it", abi)
	}
	paths := Layer{Name: "path hiding"}
	if hideErr != nil {
		paths.Level, paths.Detail = Missing, "credential paths cannot be hidden: "+hideErr.Error()
		paths.Fix = "run as root on Linux >= 5.12 (open_tree, move_mount, mount_setattr)"
	} else {
		paths.Level, paths.Detail = Full, "credential files and directories are covered, read-only and empty, in each session's mount namespace"
	}
	return []Layer{proc, paths}
}

// probeMounts tries, in a mount namespace of a throwaway thread, to mount
// the private /proc and to hide a file; it reports why either fails.
func probeMounts() (mountErr, hideErr error) {
	if os.Geteuid() != 0 {
		err := fmt.Errorf("not tried: needs root")
		return err, err
	}
	dir, err := os.MkdirTemp("", "sluice-check-hide-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		return nil, err
	}
	type res struct{ mount, hide error }
	done := make(chan res, 1)
	go func() {
		// Never unlocked: the runtime ends the thread with its
		// namespace when the goroutine returns.
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread cannot be thrown away: try again on
			// another goroutine while this one holds it.
			m, h := probeMounts()
			runtime.UnlockOSThread()
			done <- res{m, h}
			return
		}
		var r res
		spec := Spec{Processes: true, Hidden: Hidden{Patterns: []string{secret}}}
		if err := Enter(spec, nil, nil); err != nil {
			r.mount, r.hide = err, err
		} else if b, err := os.ReadFile(secret); err != nil || bytes.Contains(b, []byte("secret")) {
			r.hide = fmt.Errorf("a hidden file still reads %q (%v)", b, err)
		}
		done <- r
	}()
	r := <-done
	return r.mount, r.hide
}
