// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNetNS runs fn on a thread of its own inside the network namespace ns
// (nil: right here), so that the sockets fn creates live there: a socket
// keeps the namespace it was created in, whichever thread uses it later.
// If the thread cannot be brought back to its own namespace it is not
// unlocked, and Go retires it instead of reusing it.
func inNetNS(ns *os.File, fn func() error) error {
	if ns == nil {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			errc <- fmt.Errorf("own network namespace: %w", err)
			return
		}
		defer self.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter the session's network namespace: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- ferr // the thread stays locked and dies with this goroutine
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
