// SPDX-License-Identifier: Apache-2.0

// Package prompts is ask mode's table of pending questions: a session
// asked for a name (or an address) its policy does not allow, and a
// person decides. It is platform-free; the daemon owns the one table and
// answers it only for callers outside every session, and the session's
// resolver holds the DNS answer while it waits (dnsresolver.Config.Ask).
//
// Decisions, and why:
//   - Identical questions (same session, same name) share one prompt while
//     it is pending, and reuse its answer for Window after it is answered:
//     the A and AAAA queries of one lookup, and a client's retransmits,
//     must not raise two prompts.
//   - At most MaxPerSession prompts are pending per session (default
//     DefaultMaxPerSession): a session that asks for many unlisted names
//     is refused at once past the cap, so it cannot bury the person in
//     prompts or hold the resolver's goroutines.
//   - A prompt nobody answers is denied automatically after Timeout
//     (default five minutes, DefaultTimeout) and reported as a timeout.
//     A later identical question (past Window) asks again: the person
//     may simply have been away.
//   - A deny is remembered for the rest of the session: the same question
//     is refused without asking again.
//   - A waiter gives up when its context ends (the resolver's bound on
//     holding an answer); the prompt stays open until its timeout, and an
//     approval given meanwhile is kept for the next identical question (a
//     "once" approval is used by that one question; "session" and
//     "always" are applied to the session by the question's Apply).
//   - The table lives in memory only: a daemon that restarts forgets its
//     pending prompts, which is a denial (the held lookups were answered
//     REFUSED by the resolver's bound long before); the agent's retry asks
//     again.
package prompts
