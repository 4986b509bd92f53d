// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/sandbox/seccomp"
)

// RefuseUserNamespaces installs, on the calling thread (and what it execs
// and starts), the seccomp filter that refuses new user namespaces
// (seccomp.NoUserNamespaces says why). It sets no_new_privs, which seccomp
// needs without CAP_SYS_ADMIN; the session's command has it already.
func RefuseUserNamespaces() error {
	prog, err := seccomp.NoUserNamespaces(runtime.GOARCH)
	if err != nil {
		return err
	}
	filter, err := seccomp.Assemble(prog)
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	if err := seccomp.Install(filter); err != nil {
		return fmt.Errorf("sandbox: the user-namespace filter: %w", err)
	}
	return nil
}
