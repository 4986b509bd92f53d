package main

import (
	"errors"
	"os/exec"
)

// supervise starts c and returns its exit status as an *exitError.
func supervise(c *exec.Cmd, start func() error) error {
	if start == nil {
		start = c.Start
	}
	if err := start(); err != nil {
		return &exitError{code: exitCannotExec, err: err}
	}
	err := c.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.ExitCode()}
	}
	if err != nil {
		return &exitError{code: exitSluiceError, err: err}
	}
	return nil
}
