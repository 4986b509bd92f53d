// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on a thread of its own inside the network namespace ns and
// returns fn's error; with ns nil it runs fn right here, in the caller's
// namespace.
func Do(ns *os.File, fn func() error) error {
	if ns == nil {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine (see the
		// package documentation).
		runtime.LockOSThread()
		err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET)
		runtime.KeepAlive(ns)
		if err != nil {
			errc <- fmt.Errorf("enter the network namespace: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// DoPath is Do for the namespace file at path (/proc/PID/ns/net, a bind
// mount under /run/netns).
func DoPath(path string, fn func() error) error {
	ns, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open the network namespace: %w", err)
	}
	defer ns.Close()
	return Do(ns, fn)
}
