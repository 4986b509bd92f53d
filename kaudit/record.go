// SPDX-License-Identifier: Apache-2.0

package kaudit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Audit record types this package reads (linux/audit.h).
const (
	TypeSyscall        = 1300 // AUDIT_SYSCALL
	TypeEOE            = 1320 // AUDIT_EOE: end of a multi-record event
	TypeLandlockAccess = 1423 // AUDIT_LANDLOCK_ACCESS
	TypeLandlockDomain = 1424 // AUDIT_LANDLOCK_DOMAIN
)

// Record is one audit record: its type, the event it belongs to (time and
// serial), and its key=value fields as written (quoted values keep their
// quotes: Get and Untrusted read them).
type Record struct {
	Type   uint16
	Time   time.Time
	Serial uint64
	Fields map[string]string
}

// Get is field k without its quotes, "" when absent.
func (r Record) Get(k string) string {
	v := r.Fields[k]
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// Untrusted is field k as the kernel's audit_log_untrustedstring wrote it
// (comm, exe, paths): quoted when it is plain text, else in hex.
func (r Record) Untrusted(k string) string {
	v := r.Fields[k]
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return unhex(v)
}

// Uint is field k as a decimal number, 0 when absent or not a number.
func (r Record) Uint(k string) uint64 {
	n, _ := strconv.ParseUint(r.Get(k), 10, 64)
	return n
}

// ParseRecord parses the text of an audit record as the kernel sends it:
// "audit(1700000000.123:42): key=value key=\"quoted value\" ...".
func ParseRecord(typ uint16, text string) (Record, error) {
	r := Record{Type: typ, Fields: map[string]string{}}
	text = strings.TrimRight(text, "\x00\n")
	rest, ok := strings.CutPrefix(text, "audit(")
	if !ok {
		return r, fmt.Errorf("audit record %q: no audit( prefix", trunc(text))
	}
	stamp, rest, ok := strings.Cut(rest, "):")
	if !ok {
		return r, fmt.Errorf("audit record %q: no timestamp", trunc(text))
	}
	ts, serial, ok := strings.Cut(stamp, ":")
	if !ok {
		return r, fmt.Errorf("audit record %q: no serial", trunc(text))
	}
	var err error
	if r.Serial, err = strconv.ParseUint(serial, 10, 64); err != nil {
		return r, fmt.Errorf("audit record %q: serial: %w", trunc(text), err)
	}
	sec, frac, _ := strings.Cut(ts, ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	ms, err2 := strconv.ParseInt(frac, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return r, fmt.Errorf("audit record %q: time: %w", trunc(text), err)
	}
	r.Time = time.Unix(s, ms*int64(time.Millisecond))
	for f := range fields(rest) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		r.Fields[k] = v
	}
	return r, nil
}

// fields splits s at spaces outside double quotes. The kernel quotes a
// value with spaces or other untrusted bytes in hex instead (comm, exe,
// paths), so quotes never nest.
func fields(s string) func(func(string) bool) {
	return func(yield func(string) bool) {
		start, quoted := -1, false
		for i := 0; i <= len(s); i++ {
			if i == len(s) || (s[i] == ' ' && !quoted) {
				if start >= 0 && !yield(s[start:i]) {
					return
				}
				start = -1
				continue
			}
			if start < 0 {
				start = i
			}
			if s[i] == '"' {
				quoted = !quoted
			}
		}
	}
}

// unhex decodes an unquoted untrusted value (hex); what is not hex is
// returned as it is ("(null)", a bare number).
func unhex(v string) string {
	if v == "" || v == "(null)" || len(v)%2 != 0 {
		return v
	}
	b := make([]byte, 0, len(v)/2)
	for i := 0; i < len(v); i += 2 {
		n, err := strconv.ParseUint(v[i:i+2], 16, 8)
		if err != nil {
			return v
		}
		b = append(b, byte(n))
	}
	return string(b)
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
