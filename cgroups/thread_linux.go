// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// onThrowawayThread runs fn on an OS thread of its own that ends when fn
// returns, so that per-thread state fn changes (no_new_privs, capability
// sets) never reaches other goroutines.
//
// The goroutine locks its thread and never unlocks it: the runtime then
// terminates the thread when the goroutine exits instead of reusing it. The
// exception is the main thread, which the runtime cannot end and instead
// parks forever, leaving the process showing the altered state in
// /proc/<pid>/status. So when the goroutine finds itself there, it keeps the
// main thread untouched and, while holding it, runs fn on another goroutine,
// which therefore gets another thread.
func onThrowawayThread(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			done <- onThrowawayThread(fn)
			runtime.UnlockOSThread() // untainted: fine to reuse
			return
		}
		done <- fn()
	}()
	return <-done
}
