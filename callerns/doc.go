// SPDX-License-Identifier: Apache-2.0

// Package callerns lets the daemon start a session's command in the
// namespaces of the client that asked for it: a `sluice run` inside a
// container, talking to the host's daemon through a bind-mounted socket,
// gets its command in the container's network, UTS, IPC and PID
// namespaces (and, through package sandbox, its mount namespace and root),
// not on the host.
//
// Who may do this is the daemon's configuration (Rules): by default
// nobody, and a client in another network namespace or with another root
// directory is refused as before. A permitted caller is found through the
// pidfd the daemon took when it connected (SO_PEERPIDFD), so a pid reused
// after the caller exits cannot point the daemon at another process's
// namespaces: setns(pidfd, ...) joins the namespaces of exactly that
// process, atomically, or fails.
//
// The user namespace is not joined: a caller in another user namespace
// (a rootless container, unshare -r) is refused. In its own user namespace
// the caller holds every capability over its mount namespace, so it could
// mount over what the daemon runs there (package sandbox refuses such a
// mount namespace for the same reason), and the session's uid would mean
// a different user inside than the uid the daemon's rules judged.
package callerns
