// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"errors"
	"fmt"
)

// Kind is what a refusal means to the front door that shows it: the
// daemon maps it to an HTTP status, `sluice run` to an exit status.
type Kind int

// The kinds of errors the service returns.
const (
	// Internal: something failed that the request could not help.
	Internal Kind = iota
	// Invalid: the request is malformed or names something that does not
	// exist (a user, a command); the caller's bug, not a decision.
	Invalid
	// Forbidden: the request is well formed and refused by a rule (a
	// policy wider than allowed, a confined caller asking for more). The
	// daemon records these as session_refused.
	Forbidden
)

// Error is a refusal or failure of the service, with its kind. Err, when
// set, is the cause (errors.Is and errors.As see it: a command that cannot
// be executed stays an os.ErrPermission).
type Error struct {
	Kind Kind
	Msg  string
	Err  error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap is the cause.
func (e *Error) Unwrap() error { return e.Err }

// failf is an Error of kind k.
func failf(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// wrapf is an Error of kind k whose cause is err, which the message ends
// with.
func wrapf(k Kind, err error, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...) + ": " + err.Error(), Err: err}
}

// KindOf is err's kind: Internal for an error that is not the service's.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}
