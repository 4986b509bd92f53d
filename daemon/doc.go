// SPDX-License-Identifier: Apache-2.0

// Package daemon is sluice's orchestration room: the privileged daemon
// that owns the datapath, the sluice cgroup, the sessions' resolvers and
// the machine allowlist, and serves a local HTTP+JSON API on a unix socket
// (documented in docs/api.md) to the CLI and to agent launchers that are
// not root. The API's types and client live in package api, the audit
// model in package audit; this package is the server, and in the CLI only
// `sluice daemon` imports it.
//
// Decisions:
//   - Who may do what comes from the socket's peer credentials
//     (SO_PEERCRED), never from the request: root and members of the
//     session group may create sessions; a session always runs as the
//     client's own uid unless the client is root; clients see and kill only
//     their own sessions; changing the machine allowlist needs root or the
//     admin group. The rules themselves are kernel-free functions
//     (authz.go), unit-tested; the handlers only find out who the caller is.
//   - The daemon spawns the confined command itself, with the client's
//     stdin, stdout and stderr passed over the socket (SCM_RIGHTS): a client
//     that is not root cannot move a process into a root-owned cgroup, and
//     this way there is no moment in which the command runs unconfined.
//     Before it answers, it looks at the command as the user it will run as
//     (execcheck_linux.go), so a command that cannot run is a 400, not a
//     failure after the 200.
//   - Anyone may connect, a confined agent included, so what a caller can
//     make the daemon hold is bounded (conn_linux.go, connlimit.go): three
//     descriptors, taken only with a session request's first bytes (others
//     are closed on arrival); 128 connections per uid; every wait for a
//     request (headers 10 s, whole request 20 s, idle 15 s).
//   - A session's policy is the intersection of what it asks for with the
//     machine allowlist (allowlist.Policy.Narrow): asking for more is an
//     error naming the entries that exceed it. When the machine allowlist
//     changes, every session is narrowed again at once.
//   - Fail closed across crashes: the datapath is pinned, so kill -9 of the
//     daemon leaves every session confined (names not yet learned stop
//     resolving). Sessions are recorded in the state directory; a restarted
//     daemon re-adopts them and restarts their resolvers on the ports the
//     datapath redirects to, telling each what its session learned before
//     (the learned map) so that it is forgotten at expiry, and their
//     proxies on the ports their commands' proxy variables name (recorded
//     for this; a port another program took meanwhile is reported, not
//     replaced: the environment of a running command cannot be changed). A
//     clean shutdown does not unconfine anything.
//   - Every deny decision and policy change is an audit log line (JSON,
//     docs/audit.md); counters are Prometheus metrics on an opt-in loopback
//     address.
package daemon
