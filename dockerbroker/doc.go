// SPDX-License-Identifier: Apache-2.0

// Package dockerbroker is the Docker API socket a `sluice run --docker`
// session gets instead of the engine's: it passes to the real engine only
// the requests it can judge, and refuses the rest with the engine's own
// error form, {"message": "sluice: refused ...: why"}, which the Docker
// CLI prints.
//
// Listing docker.sock in a session's unix_sockets hands the session the
// machine: the engine does what it is asked outside the session
// (--privileged, --network host, -v /:/host, pulls from any registry).
// The broker stands between: a container's create request is parsed and
// judged (judge.go, platform-free), the container is labelled as the
// session's and placed under sluice's cgroup root, where the datapath
// refuses it everything but loopback until the session service attaches
// it with the session's policy; only the session's own containers may be
// started, stopped, inspected, attached to or removed; image pulls and
// pushes are judged by their registry host against the session's policy,
// then made through the broker's registry proxy on loopback, which judges
// every connection upstream (pullproxy.go, pushproxy.go); every other
// endpoint is refused (an allowlist of endpoints, not a blocklist).
//
// The broker forwards by hand over HTTP/1.1 on the engine's unix socket,
// with no Docker client library: a request is written as it came (the
// create's body rewritten), the response streamed back, and the
// connections the engine upgrades (attach, exec start) spliced both ways.
// Close cuts every connection it holds, streamed or upgraded, so that a
// session's end never waits on a client that follows logs.
package dockerbroker
