// SPDX-License-Identifier: Apache-2.0

// Package seatbelt is the macOS backend of the modes without BPF (see
// package userspace for why it lives there). It confines a command on macOS
// with a generated Seatbelt (SBPL) profile run by /usr/bin/sandbox-exec:
// outbound network only to loopback, where sluice's allowlist proxy listens,
// so a program that ignores HTTP_PROXY cannot go around the proxy.
//
// [Generate] is platform-free and unit-tested with golden files
// (testdata/*.sb; `go test -update` rewrites them). [Command] and
// [Available] do something only on darwin. The package builds for darwin
// in CI, but no CI machine runs the profiles under sandbox-exec: the rules
// below follow Apple's own profiles and the public ones of Chromium and the
// agent sandboxes that use sandbox-exec, and they need a check on a Mac when
// changed.
//
// Decisions:
//
//   - (allow default), then (deny network-outbound), then the exceptions.
//     Only the network is this package's business; a deny-by-default
//     profile breaks ordinary tools in ways that cannot be tested here.
//     In SBPL the last matching rule wins, so the order of the rules is
//     the policy.
//   - Unix-domain sockets stay open (ssh-agent, language servers, X11,
//     Docker): local IPC is how macOS works.
//   - DNS: the system resolver is refused by default — the mDNSResponder
//     socket and its mach services (com.apple.dnssd.service,
//     com.apple.mDNSResponder). A query there carries the name off the
//     machine even when the connection that follows is refused, so it
//     leaks data and asks upstream about names the policy denies. Names
//     are resolved by the proxy (HTTP CONNECT, SOCKS5 with remote
//     resolution), so the proxy URL must be a numeric 127.0.0.1 or [::1].
//     Profile.AllowSystemDNS turns the resolver back on for tools that
//     insist on resolving names themselves, and says what that costs.
//   - Loopback: by default only the proxy's port and the loopback TCP
//     ports the policy lists, written (remote tcp "localhost:PORT"). That
//     keeps sessions apart: another session's proxy on loopback is not
//     reachable. Profile.AllLoopback instead allows (remote ip
//     "localhost:*"), every port and protocol, as sluice's BPF mode does,
//     and with it other sessions' listeners.
//   - Seatbelt's "localhost" is 127.0.0.1 and ::1, not other 127/8
//     addresses and not the IPv4-mapped ::ffff:127.0.0.1 that dual-stack
//     sockets use: those are refused (fail closed). A JVM, whose sockets
//     are dual-stack, may need -Djava.net.preferIPv4Stack=true to reach
//     the proxy.
//   - Inbound stays allowed, so development servers work.
//
// What this tier cannot do:
//
//   - Name a remote address: SBPL's (remote tcp|udp "HOST:PORT") takes
//     only "localhost" or "*" as HOST, so the allowlist's port rules
//     ("ports") cannot be written into the profile without opening the
//     port on every address. The profile keeps outbound traffic on loopback,
//     and the proxy refuses a port outside the entry's rule (403).
//   - Anything done for the program by a process outside the sandbox:
//     `open URL` (LaunchServices starts the browser), Apple Events to other
//     applications, XPC services such as nsurlsessiond's background
//     downloads, a Docker daemon on its socket. Denying those breaks too
//     much to be a default.
//   - Peers that connect in: a development server listening on all
//     interfaces accepts connections from the network, and the program can
//     answer them.
//   - The profile is fixed when the command starts; a policy change reaches
//     a running command only through the proxy.
//   - sandbox-exec is marked deprecated by Apple, though still shipped and
//     used by agent sandboxes such as Codex CLI's (Chromium applies the
//     same profile language through sandbox_init). If it disappears,
//     Available says so and sluice must fall back to proxy-only mode with
//     a warning.
package seatbelt
