// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"fmt"
	"strings"
)

// EntryError reports one invalid entry, so that a user can find it and knows
// what to write instead.
type EntryError struct {
	// Index is the entry's 0-based position: in allowed_hosts for Parse and
	// Load, in the slice given to FromStrings or New otherwise.
	Index int
	// Line and Column (both 1-based, the column counted in characters) locate
	// the entry in a policy file. Both are 0 when the entry did not come from
	// a file.
	Line, Column int
	// Entry is the entry as written: the string, or for an object its "host"
	// value (the object's JSON text when it has no usable "host").
	Entry string
	// Err says why the entry is invalid.
	Err error
}

// Error names the entry, where it is and what is wrong with it.
func (e *EntryError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("allowed_hosts[%d] (line %d, column %d) %q: %v", e.Index, e.Line, e.Column, e.Entry, e.Err)
	}
	return fmt.Sprintf("entry[%d] %q: %v", e.Index, e.Entry, e.Err)
}

// Unwrap returns the reason, for errors.Is and errors.As.
func (e *EntryError) Unwrap() error { return e.Err }

// FileError reports a problem with the structure of a policy file rather than
// with one entry: invalid JSON, an unknown or repeated top-level key, a value
// of the wrong type.
type FileError struct {
	// Line and Column (both 1-based, the column counted in characters) locate
	// the problem in the file.
	Line, Column int
	// Err says what is wrong; for invalid JSON it wraps the *json.SyntaxError
	// when there is one.
	Err error
}

// Error gives the position and the problem.
func (e *FileError) Error() string {
	return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Column, e.Err)
}

// Unwrap returns the problem, for errors.Is and errors.As.
func (e *FileError) Unwrap() error { return e.Err }

// Error lists every problem found while building a policy. It is returned
// instead of a policy: a policy with problems is never partially applied, so
// the user can fix everything in one go and nothing half-valid is enforced.
type Error struct {
	// Problems holds *EntryError and *FileError values, in the order found.
	Problems []error
}

// Error gives every problem, one per line when there are several.
func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n\t")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap gives errors.As and errors.Is access to every problem.
func (e *Error) Unwrap() []error { return e.Problems }

// problems turns collected problems into the error to return, or nil.
func problems(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return &Error{Problems: errs}
}
