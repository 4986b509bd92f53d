// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultRemoveTimeout is the bound Session.Remove uses when given a timeout
// of zero or less.
const DefaultRemoveTimeout = 5 * time.Second

// killFallbackTimeout bounds Kill's signal loop on kernels without cgroup.kill.
const killFallbackTimeout = 5 * time.Second

// maxPollDelay caps the back-off between polls: short enough that removal is
// not noticeably slower than the processes' exit.
const maxPollDelay = 50 * time.Millisecond

// Kill sends SIGKILL to every process in the session and returns without
// waiting for them to exit (Remove waits). It uses cgroup.kill (Linux 5.14),
// which the kernel applies atomically, forks in flight included. On older
// kernels it freezes the session (cgroup.freeze, 5.2) so nothing can fork,
// signals every pid in cgroup.procs until the list is empty or about five
// seconds have passed, then thaws it. It wraps fs.ErrNotExist when the session
// is gone.
func (s *Session) Kill() error {
	return s.kill(time.Now().Add(killFallbackTimeout))
}

func (s *Session) kill(deadline time.Time) error {
	err := writeFile(s.root.mount, s.rel("cgroup.kill"), "1")
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return wrapSession(s, err)
	}
	// Either the session is gone or the kernel predates cgroup.kill.
	if _, err := s.event("populated"); err != nil {
		return err
	}
	return s.killBySignal(deadline)
}

// killBySignal is Kill for kernels without cgroup.kill.
func (s *Session) killBySignal(deadline time.Time) error {
	// Freezing stops the processes from forking faster than they are killed;
	// SIGKILL still ends frozen tasks in cgroup v2.
	if writeFile(s.root.mount, s.rel("cgroup.freeze"), "1") == nil {
		// Thawing is best effort: the session is being killed either way.
		defer func() { _ = writeFile(s.root.mount, s.rel("cgroup.freeze"), "0") }()
	}
	member := "/" + s.rel()
	for delay := time.Millisecond; ; delay = min(2*delay, maxPollDelay) {
		pids, err := s.Procs()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			killIfMember(pid, member)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroups: session %s: processes %v still listed after SIGKILL", s.name, pids)
		}
		time.Sleep(delay)
	}
}

// killIfMember sends SIGKILL to pid if it is still in the cgroup whose path
// ends with member. The pidfd pins the process, so checking membership after
// opening it means a pid recycled in between is never killed by mistake.
func killIfMember(pid int, member string) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		// Before Linux 5.3: a narrow pid-reuse race remains, as with kill(1).
		if inCgroup(pid, member) {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		return
	}
	if err != nil {
		return // gone already
	}
	defer unix.Close(pidfd)
	if inCgroup(pid, member) {
		_ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
	}
}

// inCgroup reports whether /proc/<pid>/cgroup puts pid in a cgroup2 path
// ending with member. The suffix match is needed because the path is shown
// relative to the reader's cgroup namespace, not the mount.
func inCgroup(pid int, member string) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p == member || strings.HasSuffix(p, member)
		}
	}
	return false
}

// Remove kills the session's processes, waits until the session is empty, and
// removes its cgroup, all within timeout (DefaultRemoveTimeout when timeout is
// zero or less). A session that is already gone is not an error, so Remove is
// safe to call again and from cleanup paths.
//
// The session counts as empty when cgroup.events says it is unpopulated;
// processes killed but not yet reaped by their parent (for instance an
// exec.Cmd not yet waited for) do not keep it populated.
func (s *Session) Remove(timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultRemoveTimeout
	}
	deadline := time.Now().Add(timeout)
	s.releaseStub()
	err := s.kill(deadline)
	if err == nil {
		err = s.waitUnpopulated(deadline)
	}
	if err == nil {
		err = s.rmdir(deadline)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// waitUnpopulated polls cgroup.events until the session is empty or the
// deadline passes.
func (s *Session) waitUnpopulated(deadline time.Time) error {
	for delay := time.Millisecond; ; delay = min(2*delay, maxPollDelay) {
		populated, err := s.Populated()
		if err != nil || !populated {
			return err
		}
		if time.Now().After(deadline) {
			pids, _ := s.Procs()
			return fmt.Errorf("cgroups: session %s still has processes %v after SIGKILL", s.name, pids)
		}
		time.Sleep(delay)
	}
}

// rmdir retries EBUSY, which the kernel can still report for a moment after
// the last process has left.
func (s *Session) rmdir(deadline time.Time) error {
	for delay := time.Millisecond; ; delay = min(2*delay, maxPollDelay) {
		err := rmdirBeneath(s.root.mount, s.root.name, s.name)
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return wrapSession(s, err)
		}
		time.Sleep(delay)
	}
}
