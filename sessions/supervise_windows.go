// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"errors"
	"os"
	"os/exec"
)

// supervise starts c, calls started once it runs and returns its exit
// status. Windows has no signals to forward.
func supervise(c *exec.Cmd, _ bool, started func()) (int, error) {
	if err := c.Start(); err != nil {
		return 0, err
	}
	started()
	err := c.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, err
}

// isTerminal is false: only the unix supervisor asks.
func isTerminal(*os.File) bool { return false }
