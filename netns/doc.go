// SPDX-License-Identifier: Apache-2.0

// Package netns runs a function inside another network namespace, so that
// the sockets it creates live there: a socket keeps the namespace it was
// created in, whichever thread uses it later. The session's proxy and
// resolver listen inside a daemon caller's namespace this way (package
// enforcer), the kernel-DNS path opens its raw answer sockets there, and
// the test world (tests/world) starts its servers and clients in its own.
//
// Why a fresh thread that is thrown away afterwards: setns(2) changes the
// calling thread only, and Go moves goroutines between threads; a thread
// put back into the scheduler in the wrong namespace would run unrelated
// goroutines there. So fn runs on a new goroutine locked to its OS thread,
// and the lock is never released: when the goroutine ends, the runtime ends
// the thread with it. Nothing is restored, so nothing can fail to be.
// Goroutines that fn starts do not run in the namespace.
package netns
