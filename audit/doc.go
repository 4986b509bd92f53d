// SPDX-License-Identifier: Apache-2.0

// Package audit is sluice's one audit-event model: what a session's
// enforcement decided (kernel denials, DNS refusals, proxy refusals), what
// happened to sessions and to the machine allowlist, and the JSON form of
// all of it (docs/audit.md, docs/audit.schema.json). The daemon streams
// and logs these events; `sluice run` writes the same lines in embedded
// mode (--audit-log) and reads them back from the daemon's stream.
//
// Decisions:
//   - Events flow one way: the producers (loader, dnsresolver, the proxy)
//     know nothing of this package; it converts their events (FromKernel,
//     FromDNS, FromProxy), and the daemon and the CLI consume the result.
//     It imports neither the daemon nor the CLI, so the CLI's embedded
//     mode never needs the daemon for its audit log.
//   - Field names and type strings are an interface: auditors parse them.
//     A test checks every type against the schema in docs/.
//   - A confined program can cause denials as fast as the kernel refuses
//     them, so deny lines go through a per-session token bucket (Limiter);
//     an events_suppressed line says how many were left out. Lifecycle and
//     policy lines are never limited.
package audit
