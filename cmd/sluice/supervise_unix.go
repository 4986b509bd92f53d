// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// supervise starts the command with start, forwards signals to it (not ^C
// and ^\ from a terminal, which already reached its process group) and
// returns its exit status as an *exitError (nil for 0), or start's error.
// Signals that arrive while it starts are queued, not lost.
func supervise(start func() (*exec.Cmd, error)) error {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	defer signal.Stop(sigs)
	c, err := start()
	if err != nil {
		return err
	}
	tty := isTerminal(os.Stdin)
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
	err = c.Wait()
	close(done)
	return exitStatus(err)
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios)
	return err == nil
}

// exitStatus maps the command's end to sluice's exit status: its exit code,
// or 128+signal like a shell.
func exitStatus(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &exitError{code: 128 + int(ws.Signal())}
		}
		return &exitError{code: ee.ExitCode()}
	}
	return &exitError{code: exitSluiceError, err: err}
}
