// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// inheritedFiles is what `sluice run --preserve-fds n` hands the command
// beyond stdin, stdout and stderr: descriptors 3 to 3+n-1, which must be
// open. Every other descriptor sluice inherited is marked close-on-exec
// first, so the command gets none of them: a socket opened outside the
// session keeps the cgroup it was created in, so the datapath never
// judges it, and a CI runner's or an editor's socket handed down by
// accident would be a way out. This is sudo's default (closefrom 3;
// sudo -C and the closefrom_override option let some through) and
// systemd-run's situation (a unit inherits nothing); --preserve-fds is
// named after systemd-nspawn's, podman's and crun's flag of the same
// meaning. It must run before sluice opens descriptors of its own that a
// child should have (it runs first thing in `sluice run`).
func inheritedFiles(n int) ([]*os.File, error) {
	if n < 0 {
		return nil, fmt.Errorf("--preserve-fds must be 0 or more, got %d", n)
	}
	for fd := 3; fd < 3+n; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return nil, fmt.Errorf("--preserve-fds %d: descriptor %d is not open: %w", n, fd, err)
		}
	}
	if err := closeInheritedOnExec(); err != nil {
		return nil, err
	}
	files := make([]*os.File, 0, n)
	for fd := 3; fd < 3+n; fd++ {
		files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("inherited-fd-%d", fd)))
	}
	return files, nil
}
