// SPDX-License-Identifier: Apache-2.0

// Package api is the sluice daemon's API as its clients see it: the
// request and response types of the HTTP+JSON API on the daemon's unix
// socket (docs/api.md) and a client for it. The server lives in package
// daemon; this package does not import it, so a client (the CLI's client
// commands, `sluice run` through a daemon, an agent launcher) links no
// server code.
//
// Decisions:
//   - JSON field names are part of the interface: clients in other
//     languages use them.
//   - Where the daemon is found is decided here (SocketPath): the --socket
//     flag, then $SLUICE_SOCKET, then DefaultSocket.
//   - The client passes the command's stdin, stdout and stderr with the
//     create request (SCM_RIGHTS), so that the daemon spawns the command
//     itself and no process ever runs unconfined.
//   - A create stream that ends without an exit status means the daemon
//     went away, not that the command ended: Run then returns a
//     *StreamLostError naming the session, and Wait reattaches to it on
//     the next daemon, which knows the status even of a command that
//     ended while no daemon ran (package exitstatus).
package api
