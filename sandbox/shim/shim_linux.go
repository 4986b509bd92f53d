// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/exitstatus"
	"github.com/sluice-dev/sluice/sandbox"
	"github.com/sluice-dev/sluice/sandbox/seccomp"
)

// LayerError is an error of Exec before the command's exec began: a
// sandbox layer could not be put on, so nothing ran. The caller reports it
// as its own failure, not the command's.
type LayerError struct{ Err error }

func (e *LayerError) Error() string { return e.Err.Error() }

// Unwrap returns the layer's error.
func (e *LayerError) Unwrap() error { return e.Err }

// Exec puts the calling process in o's sandbox and replaces it with
// o.Path run with o.Argv and env (see the package documentation for the
// order). Notes about layers this kernel lacks go to notes. It returns
// only on error: a *LayerError if a layer failed, otherwise the exec's
// error, prefixed with o.Argv[0] (os.ErrNotExist when the program is
// missing). The calling thread stays locked and possibly confined, so the
// caller should exit.
func Exec(o Options, env []string, notes io.Writer) error {
	if o.Path == "" || len(o.Argv) == 0 {
		return &LayerError{errors.New("shim: no command")}
	}
	// Landlock and seccomp apply to the calling thread; the exec that
	// follows must happen on the same one. Never unlocked.
	runtime.LockOSThread()
	if !o.ShareProcesses {
		missing, err := sandbox.RestrictSelf(sandbox.Scopes{Signal: true, AbstractUnix: !o.AbstractUnix})
		if err != nil {
			return &LayerError{err}
		}
		for _, m := range missing {
			fmt.Fprintf(notes, "sluice: note: this kernel lacks the Landlock %s: the command can still reach outside its session that way\n", m)
		}
	}
	// Without the Landlock domain, which refuses every mount, a user
	// namespace would let the command mount over allowed unix socket
	// names.
	if o.ShareProcesses && !o.AllowUserNamespaces {
		if err := sandbox.RefuseUserNamespaces(); err != nil {
			return &LayerError{err}
		}
	}
	if err := execFamilies(o.Path, o.Argv, env); err != nil {
		return fmt.Errorf("%s: %w", o.Argv[0], err)
	}
	return nil
}

// execFamilies replaces the calling process with path under no_new_privs
// and the socket-family filter (seccomp.Families).
func execFamilies(path string, argv []string, env []string) error {
	prog, err := seccomp.Families(runtime.GOARCH)
	if err != nil {
		return err
	}
	filter, err := seccomp.Assemble(prog)
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: setting no_new_privs: %w", err)
	}
	if err := seccomp.Install(filter); err != nil {
		return err
	}
	if err := unix.Exec(path, argv, env); err != nil {
		return fmt.Errorf("executing %s: %w", path, err)
	}
	return nil
}

// Supervise runs the shim with args (its arguments after FlagExitFD N) as
// a child, writes the child's exit status to status and returns it
// (exitstatus.Supervise). The error is for a shim binary that cannot be
// found.
func Supervise(status *os.File, args []string) (int, error) {
	// The running binary itself, not the path it was started from: a
	// daemon starts the shim from a descriptor in a caller's mount
	// namespace (a container), where that path is another file or none.
	self := "/proc/self/exe"
	if _, err := os.Stat(self); err != nil {
		if self, err = os.Executable(); err != nil {
			return 0, err
		}
	}
	child := &exec.Cmd{Path: self, Args: append([]string{self, Name}, args...),
		Env: os.Environ(), Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	// What the daemon handed the supervisor besides its status (a
	// listening socket it keeps for the session, descriptor 4) is the
	// supervisor's alone, as the status is.
	closeOnExecAbove(2)
	return exitstatus.Supervise(child, status), nil
}

// closeOnExecAbove marks every open descriptor above n close-on-exec, so
// that what the process inherited is not passed on to its children.
func closeOnExecAbove(n int) {
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, de := range des {
		if fd, err := strconv.Atoi(de.Name()); err == nil && fd > n {
			unix.CloseOnExec(fd)
		}
	}
}
