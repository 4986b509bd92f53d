// SPDX-License-Identifier: Apache-2.0

// Package wfp is the Windows backend of the modes without BPF (see package
// userspace for why it lives there). It confines a command on Windows with
// Windows Filtering Platform filters: the confined process tree may connect
// only to loopback (where sluice's allowlist proxy listens), so a program
// that ignores HTTP_PROXY cannot go around the proxy.
//
// [Build] is platform-free: it returns the filter set as plain [Filter]
// values, unit-tested everywhere with golden files (testdata/*.golden;
// `go test -update` rewrites them). [Install] turns them into FWPM_FILTER0s
// through fwpuclnt.dll on 64-bit Windows (amd64, arm64).
//
// # Behind the sluice_wfp build tag
//
// Every file but this one carries the sluice_wfp build tag, so a normal
// build of sluice contains none of it and Windows runs in proxy mode only.
// Why: the filters confine a dedicated local user, and sluice does not yet
// create that user nor start the command under its token (NetUserAdd,
// LogonUser, CreateProcessAsUser, a profile and ACLs on the project). That
// half cannot be tested without a Windows machine, and shipping the filters
// without it would promise a containment that nothing delivers. The tag
// keeps the finished half honest until then: `make lint` vets and builds it
// for windows/amd64 and windows/arm64 with the tag, and `make unit` runs its
// golden tests.
//
// Install is compiled but NOT exercised in CI: it is built and vetted with
// GOOS=windows, and compile-time assertions pin every struct's size and
// field offsets to the C layout, but no test runs it against a Base
// Filtering Engine. Run it on a Windows machine after changing it (as
// administrator; `netsh wfp show filters` lists what it installed).
//
// # Decisions
//
//   - Who is confined: a dedicated local user. The command runs under that
//     user's token, every descendant inherits the token, and every filter
//     matches FWPM_CONDITION_ALE_USER_ID, so the whole tree is covered,
//     whatever executables it starts. Per-application filters
//     (FWPM_CONDITION_ALE_APP_ID) match one executable path and do not
//     follow child processes (node starts git starts ssh); WFP has no
//     condition for a job object or a process tree; an AppContainer follows
//     children too but also walls off the file system and loopback, which
//     breaks development tools. Creating the user and starting the command
//     with its token is the caller's work; the user needs access to the
//     project, nothing else.
//   - The ALE_USER_ID value is a security descriptor granting
//     FWP_ACTRL_MATCH_FILTER to the user ("D:(A;;0x1;;;SID)"): WFP matches a
//     connection when an access check of the process token against it
//     succeeds. Build accepts only an ordinary account SID (S-1-5-21-...,
//     RID 1000 or above), so a mistake cannot confine SYSTEM, Everyone or
//     the built-in Administrator; Install refuses any filter that has no
//     user condition, so no bug can filter the whole machine.
//   - Loopback is recognised by FWP_CONDITION_FLAG_IS_LOOPBACK rather than
//     127.0.0.0/8 and ::1: one condition for both families, and it also
//     covers the machine's own addresses, which never leave it either.
//   - Layers: ALE_AUTH_CONNECT_V4/V6 (outbound connects and the first
//     datagram to each UDP peer) permit loopback — only the proxy's port
//     and the listed TCP ports, or all of loopback with Policy.AllLoopback
//     — and block the rest. ALE_AUTH_RECV_ACCEPT_V4/V6 permit loopback and
//     block the rest too: a peer on the network that connects in to a
//     listener the program opened would be a channel around the proxy;
//     local clients (tests, browsers on the same machine) still get in.
//   - Arbitration: each Install opens its own dynamic session and adds a
//     sublayer with a random key and the highest weight (0xFFFF), so it is
//     evaluated first, as wireguard-windows' firewall does. In it the
//     permit (weight 10) outranks the block (weight 2). Blocks carry
//     FWPM_FILTER_FLAG_CLEAR_ACTION_RIGHT (hard: a permit in another
//     sublayer, such as a Windows Firewall allow rule, cannot override
//     them); permits are soft, so other sublayers may still block.
//   - The session is dynamic (FWPM_SESSION_FLAG_DYNAMIC): closing it, or
//     sluice dying in any way, makes the Base Filtering Engine delete the
//     sublayer and its filters. Nothing persists across a crash or a
//     reboot. All objects are added in one transaction: all or none.
//   - Port list by default, as for Landlock and Seatbelt: other sessions'
//     proxies on loopback stay out of reach unless AllLoopback is chosen.
//
// # What this tier cannot do
//
//   - DNS: name lookups are made by the DNS Client service (Dnscache, as
//     NETWORK SERVICE), not by the user's processes, so the user's filters
//     cannot stop them. Queried names leave the machine (a channel for a
//     few bytes at a time); the connections that would follow do not.
//   - Work done by services under other accounts on the program's behalf
//     (BITS transfers, a Docker daemon, an unconfined local proxy reached
//     over a named pipe) is outside the user's filters.
//   - With AllLoopback, anything that listens on loopback is reachable,
//     including another tool's unconfined proxy.
//   - ICMP sent through the IP Helper API (IcmpSendEcho, used by ping.exe)
//     has not been checked against these layers.
//   - Installing filters needs administrator rights; the confined user
//     must not have them.
package wfp
