// SPDX-License-Identifier: Apache-2.0

// Package suggest turns what a session was refused (or, in audit mode,
// would have been) into a network_allowlist.json to review: the session's
// own entries plus the names it asked for and the addresses it dialled
// without a name, never allow_private on its own (that is what DNS
// rebinding looks like), bounded in memory. `sluice run
// --suggest-allowlist` and `sluice learn` feed it a session's events;
// `sluice suggest` reads them back from an audit log (FromAudit). A
// suggestion is a starting point, never applied by itself.
package suggest
