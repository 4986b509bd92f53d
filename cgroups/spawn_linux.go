// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Start starts cmd inside the session, as opts.UID/opts.GID with exactly
// opts.Groups, with no_new_privs set and no capabilities: empty effective,
// permitted, inheritable, ambient and bounding sets. The process is created
// in the session by clone3(CLONE_INTO_CGROUP) (Linux 5.7), so it never runs
// outside it. The caller must be root (or hold CAP_SETUID, CAP_SETGID and
// CAP_SETPCAP and be able to write to the session's cgroup.procs).
//
// Start refuses uid 0 (ErrRootUID), and refuses a cmd.SysProcAttr that sets
// Credential, UseCgroupFD, AmbientCaps, Pdeathsig, Ptrace, or a new user
// namespace, since each would either be overwritten or undo the confinement;
// other fields (Setpgid, Setctty, ...) are kept. Pdeathsig deserves a note:
// the kernel sends it when the creating thread exits, and Start creates the
// process from a thread that exits at once; end sessions with Kill or Remove.
//
// As with exec.Cmd.Start, the caller must call cmd.Wait to reap the process.
func (s *Session) Start(cmd *exec.Cmd, opts SpawnOptions) error {
	return s.StartWith(cmd, opts, nil)
}

// StartWith is Start with a step of the caller's: prepare runs, as root,
// on the thread that then clones the process, just before the clone, so
// that per-thread state it sets up (a mount namespace the child is born
// in: package sandbox) reaches the child and nothing else. The thread is
// discarded afterwards. An error from prepare starts nothing.
func (s *Session) StartWith(cmd *exec.Cmd, opts SpawnOptions, prepare func() error) error {
	if cmd == nil {
		return errors.New("cgroups: Start: nil *exec.Cmd")
	}
	if err := opts.validate(); err != nil {
		return err
	}
	attr, err := confinedAttr(cmd.SysProcAttr, opts)
	if err != nil {
		return err
	}
	// A plain directory fd is what CLONE_INTO_CGROUP takes; it is closed
	// when Start returns, the child having been placed by then.
	fd, err := openBeneath(s.root.mount, s.rel(), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("cgroups: start in session %s: %w", s.name, err)
	}
	defer unix.Close(fd)
	attr.UseCgroupFD = true
	attr.CgroupFD = fd
	cmd.SysProcAttr = attr

	err = onThrowawayThread(func() error {
		if prepare != nil {
			if err := prepare(); err != nil {
				return err
			}
		}
		return startConfined(cmd)
	})
	// The command is in the session (or failed to start): a systemd
	// scope's placeholder has done its job.
	s.releaseStub()
	if err != nil {
		return fmt.Errorf("cgroups: start %s in session %s: %w", cmd.Path, s.name, err)
	}
	return nil
}

// confinedAttr returns a copy of orig with the credentials set, or an error
// naming a field that conflicts with confinement.
func confinedAttr(orig *syscall.SysProcAttr, opts SpawnOptions) (*syscall.SysProcAttr, error) {
	var a syscall.SysProcAttr
	if orig != nil {
		a = *orig
	}
	var why string
	switch {
	case a.Credential != nil:
		why = "Credential is set; Start sets the credentials from SpawnOptions"
	case a.UseCgroupFD:
		why = "UseCgroupFD is set; Start places the process in its session"
	case len(a.AmbientCaps) > 0:
		why = "AmbientCaps would give the confined command capabilities"
	case a.Pdeathsig != 0:
		why = "Pdeathsig fires when the creating thread exits, and Start's thread exits at once; use Session.Kill or Remove to end the session"
	case a.Ptrace:
		why = "Ptrace ties the child to the creating thread, which Start discards"
	case (a.Cloneflags|a.Unshareflags)&syscall.CLONE_NEWUSER != 0 || a.UidMappings != nil || a.GidMappings != nil:
		why = "a new user namespace would give the confined command a full capability set inside it"
	}
	if why != "" {
		return nil, fmt.Errorf("cgroups: refusing cmd.SysProcAttr: %s", why)
	}
	// Credential.Groups empty still makes the child call setgroups(0), so
	// the caller's own supplementary groups are never inherited.
	a.Credential = &syscall.Credential{Uid: opts.UID, Gid: opts.GID, Groups: slices.Clone(opts.Groups)}
	if opts.Setsid {
		a.Setsid = true
	}
	return &a, nil
}

// startConfined must run on a thread that is discarded afterwards: everything
// it sets is per-thread, irreversible, and inherited by the child.
func startConfined(cmd *exec.Cmd) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := dropThreadCaps(); err != nil {
		return err
	}
	return cmd.Start()
}

// dropThreadCaps empties this thread's ambient, bounding and inheritable
// sets, which a child inherits and keeps across setuid. The effective and
// permitted sets stay: the child needs CAP_SETUID and CAP_SETGID until it
// switches to the target user, which then clears them (keep-caps is off).
// The empty bounding set means that even a file-capability binary or a
// setuid-root binary (already inert under no_new_privs) grants nothing.
func dropThreadCaps() error {
	err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	if err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: before Linux 4.3, no ambient set
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	for c := 0; c <= lastCap(); c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w (dropping the bounding set needs CAP_SETPCAP)", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset (clear inheritable): %w", err)
	}
	return nil
}

// lastCap is the kernel's highest capability number; the loop in
// dropThreadCaps also stops at EINVAL, so the fallback may overshoot.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return 63
}
