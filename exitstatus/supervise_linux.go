// SPDX-License-Identifier: Apache-2.0

package exitstatus

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Exit statuses of the supervisor itself, as the shell reports them.
const (
	cannotExec = 126
	notFound   = 127
)

// forwarded are the signals a supervisor passes on to the command: every
// signal the daemon's API forwards but KILL and STOP, which cannot be
// caught (KILL reaches the command through its parent-death signal).
var forwarded = []os.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2,
	unix.SIGWINCH, unix.SIGCONT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGALRM}

// Supervise runs cmd (Stdin, Stdout, Stderr and Env already set) as a
// child, forwards signals to it, writes its exit status to status, and
// returns that status: the command's exit code, or 128+S when signal S
// killed it. The supervisor makes itself non-dumpable first, so that
// processes of the same uid cannot take the status descriptor, and gives
// the child SIGKILL as its parent-death signal, so that the command never
// outlives its supervisor unconfined from the daemon's view.
func Supervise(cmd *exec.Cmd, status *os.File) int {
	// The parent-death signal belongs to the thread that forks: this one,
	// which lives as long as the supervisor.
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// The status descriptor is the supervisor's alone.
	unix.CloseOnExec(int(status.Fd()))
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = unix.SIGKILL
	code := run(cmd, sigs)
	signal.Stop(sigs)
	_ = Write(status, code)
	return code
}

func run(cmd *exec.Cmd, sigs chan os.Signal) int {
	if err := cmd.Start(); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return notFound
		}
		return cannotExec
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	return Code(err)
}

// Code is the exit status exec.Cmd.Wait's err stands for: 0, the exit
// code, 128+S for a signal S, or 125 when the wait itself failed.
func Code(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 125
}
