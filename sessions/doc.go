// SPDX-License-Identifier: Apache-2.0

// Package sessions is the session service: one confined session's whole
// lifecycle, whoever asks for it. A front door (the daemon behind its
// API, or `sluice run` in-process) says who the caller is (Caller) and
// what it asks for (api.CreateRequest); the service
//
//   - applies the rules (Prepare: who may create a session and as whom,
//     a policy may only narrow the machine allowlist and a confined
//     caller's own session, audit and sandbox options, hidden and
//     read-only paths), all platform-free and unit-tested without root;
//   - builds the enforcer session and starts the command in it (Start);
//   - runs the one event pipeline: datapath, resolver, proxy and sandbox
//     refusals become audit.Events of the session, rate-limited, in
//     order after session_started, handed to the front door's Sink;
//   - in ask mode (api.CreateRequest.Ask, ask_linux.go), lets its resolver
//     hold the answer to an unlisted name while a person decides through
//     the front door's prompt table (Config.Prompts: only the daemon has
//     one), and raises a prompt for a refused connect to an address no
//     name gave; approvals reach the session's resolver and datapath;
//   - ends the session when the command exits (Wait): leftover processes
//     killed, pending denials drained, datapath removed, session_ended.
//
// The front doors keep only what is theirs: the daemon its HTTP layer,
// records for re-adoption and event streams; `sluice run` its terminal
// lines, --audit-log and suggestion. Local is the in-process front door's
// runner, with the same Run as api.Client, so `sluice run` has one runner
// whether a daemon serves it or not.
//
// The modes without BPF (landlock, seatbelt, proxy) are sessions too, and
// their runner is here as well (Userspace, StartUserspace): the allowlist
// proxy on loopback in this process, its resolver with --dns-upstream,
// the platform's backend around the command (userspace_linux.go,
// userspace_darwin.go), the command started and supervised, refusals
// handed on as audit.Events. It has no cgroup, no datapath and no Prepare
// (the caller is the user, confining their own command), so it shares no
// code with Service; it lives here because this room is the one that
// starts a session's command, whoever asks and in whatever mode, and the
// front door keeps only what it tells the user. It is not in userspace/:
// that room holds one backend per kernel mechanism (how to confine one
// command), below the sessions that use them, and stays free of the api
// and the lifecycle.
package sessions
