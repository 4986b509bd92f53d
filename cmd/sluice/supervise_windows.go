// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"os/exec"
)

// supervise starts the command with start and returns its exit status as
// an *exitError, or start's error.
func supervise(start func() (*exec.Cmd, error)) error {
	c, err := start()
	if err != nil {
		return err
	}
	err = c.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.ExitCode()}
	}
	if err != nil {
		return &exitError{code: exitSluiceError, err: err}
	}
	return nil
}
