// SPDX-License-Identifier: Apache-2.0

package seatbelt

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// sandboxExec is Apple's front end to sandbox_init; by absolute path so
// that nothing on PATH can stand in for it.
const sandboxExec = "/usr/bin/sandbox-exec"

// Available returns nil when sandbox-exec is present, else why not.
func Available() error {
	if _, err := os.Stat(sandboxExec); err != nil {
		return fmt.Errorf("seatbelt: %w", err)
	}
	return nil
}

// Command returns `sandbox-exec -p PROFILE -- ARGV...`, ready for the
// caller's stdio, environment and Start. sandbox-exec applies the profile
// and then executes argv[0], found on PATH; everything it starts inherits
// the sandbox.
func Command(profile string, argv []string) (*exec.Cmd, error) {
	if profile == "" {
		return nil, errors.New("seatbelt: empty profile")
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("seatbelt: no command")
	}
	if err := Available(); err != nil {
		return nil, err
	}
	return exec.Command(sandboxExec, append([]string{"-p", profile, "--"}, argv...)...), nil
}
