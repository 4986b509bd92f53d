// SPDX-License-Identifier: Apache-2.0

// Package report is what the user of `sluice run` is told about their
// session: one line per denial on the command's terminal (rate-limited,
// so a retry loop cannot flood it), the summary at exit, and the
// --audit-log file in the daemon's audit format. It reads the one event
// model (package audit), whoever produced the events: the in-process
// session service, the daemon's stream, or the userspace modes' proxy and
// resolver. What the events would add to the allowlist is collected on
// the way (package suggest).
package report
