// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// BuiltinUnixSockets is the short list of unix sockets every session may
// reach without listing them, because they carry no network work for the
// caller:
//
//   - /dev/log, /run/systemd/journal/dev-log, /run/systemd/journal/socket
//     and /run/systemd/journal/stdout: the syslog and journal sockets. They
//     take log records and write them to local storage; nothing sent there
//     is forwarded anywhere on the caller's behalf (a configured remote
//     syslog forwards records, not requests, and not to a destination the
//     caller picks).
//   - $SSH_AUTH_SOCK, when it is an absolute path: the ssh agent signs
//     challenges with keys it holds and never opens connections. (Agent
//     forwarding happens in the ssh client, which the session runs itself
//     and whose connections the datapath judges.)
//   - gpg-agent's sockets S.gpg-agent and S.gpg-agent.ssh in
//     /run/user/UID/gnupg (and in $GNUPGHOME when set): they sign and
//     decrypt with keys the agent holds. dirmngr's socket (S.dirmngr),
//     which fetches keys from keyservers, is deliberately not in the list,
//     nor the .extra and .browser sockets meant for remote use.
//
// Names are judged as the caller writes them (see loader), so only the
// spellings above are allowed: /dev/log is a symlink to the journal's
// dev-log on systemd machines, and both names are listed. env is the
// command's environment; uid its user.
//
// The names taken from env (EnvUnixSockets) are whatever the one who
// starts the session says they are. That is the user's own choice for a
// session it starts from outside sluice; a process inside a session that
// starts another one must not pick them, or it could name any socket
// (docker.sock) as its agent: see CommandSpec.EnvSocketsWithin.
func BuiltinUnixSockets(uid uint32, env []string) []string {
	return append(fixedUnixSockets(uid), EnvUnixSockets(env)...)
}

// fixedUnixSockets are the built-in names that do not depend on the
// command's environment.
func fixedUnixSockets(uid uint32) []string {
	return []string{
		"/dev/log",
		"/run/systemd/journal/dev-log",
		"/run/systemd/journal/socket",
		"/run/systemd/journal/stdout",
		fmt.Sprintf("/run/user/%d/gnupg/S.gpg-agent", uid),
		fmt.Sprintf("/run/user/%d/gnupg/S.gpg-agent.ssh", uid),
	}
}

// EnvUnixSockets are the built-in names the environment env chooses:
// $SSH_AUTH_SOCK when it is an absolute path, and gpg-agent's signing
// sockets in $GNUPGHOME (BuiltinUnixSockets).
func EnvUnixSockets(env []string) []string {
	var names []string
	if v := envValue(env, "SSH_AUTH_SOCK"); filepath.IsAbs(v) && len(v) < 108 {
		names = append(names, v)
	}
	if v := envValue(env, "GNUPGHOME"); filepath.IsAbs(v) {
		for _, s := range []string{"S.gpg-agent", "S.gpg-agent.ssh"} {
			if p := filepath.Join(v, s); len(p) < 108 {
				names = append(names, p)
			}
		}
	}
	return names
}

// WithinEnvSockets splits names (EnvUnixSockets of a command's
// environment) into those within bounds, which the session gets, and the
// others; nil bounds means no bound. A name is within bounds only when it
// is one of them, exactly: never a new path.
func WithinEnvSockets(names []string, bounds *[]string) (kept, refused []string) {
	if bounds == nil {
		return names, nil
	}
	for _, n := range names {
		if slices.Contains(*bounds, n) {
			kept = append(kept, n)
		} else {
			refused = append(refused, n)
		}
	}
	return kept, refused
}

// QuietUnixSockets are name-service sockets that sessions may not reach
// and whose refusals are not reported: nscd and systemd-resolved's varlink
// socket resolve any host name for the caller (unlisted names would leave
// the machine in the query), and glibc tries them on every user or host
// lookup, falling back to the files and to DNS (which the session's
// resolver judges) when they refuse. A line for each lookup would bury the
// refusals that matter. Listing one in unix_sockets allows it.
var QuietUnixSockets = []string{
	"/var/run/nscd/socket",
	"/run/nscd/socket",
	"/run/systemd/resolve/io.systemd.Resolve",
}

// envValue is the last value of name in env (later entries win, as in
// exec).
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}
