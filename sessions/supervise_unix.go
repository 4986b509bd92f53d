// SPDX-License-Identifier: Apache-2.0

//go:build unix

package sessions

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// supervise starts c, calls started once it runs, forwards signals to it
// (not ^C and ^\ when tty: from a terminal they already reached its
// process group) and returns its exit status, 128+signal like a shell for
// a command a signal ended. Signals that arrive while it starts are
// queued, not lost.
func supervise(c *exec.Cmd, tty bool, started func()) (int, error) {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	defer signal.Stop(sigs)
	if err := c.Start(); err != nil {
		return 0, err
	}
	started()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				if tty && (sig == unix.SIGINT || sig == unix.SIGQUIT) {
					continue
				}
				_ = c.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	err := c.Wait()
	close(done)
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, err
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios)
	return err == nil
}
