// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"os"
)

// inheritedFiles: a Windows process inherits only the handles its parent
// lists, and os/exec lists only the standard ones, so there is nothing to
// close; --preserve-fds has no meaning here.
func inheritedFiles(n int) ([]*os.File, error) {
	if n != 0 {
		return nil, errors.New("--preserve-fds is for Linux and macOS; Windows handles are not inherited")
	}
	return nil, nil
}
