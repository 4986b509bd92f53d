// SPDX-License-Identifier: Apache-2.0

package exitstatus

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// maxLen bounds what Read accepts: a status is a few digits and a newline.
const maxLen = 16

// Format is how a status is written: decimal and a newline.
func Format(code int) []byte { return []byte(strconv.Itoa(code) + "\n") }

// Parse reads a status written by Format. ok is false for an empty file
// (the command has not ended, or its supervisor died before writing).
func Parse(b []byte) (code int, ok bool, err error) {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, false, nil
	}
	if len(b) > maxLen {
		return 0, false, fmt.Errorf("exit status file: %d bytes, want at most %d", len(b), maxLen)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 255 {
		return 0, false, fmt.Errorf("exit status file: %q is not an exit status", s)
	}
	return n, true, nil
}

// Read reads the status file at path. A missing or empty file is not an
// error: ok is false.
func Read(path string) (code int, ok bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	b := make([]byte, maxLen+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, false, err
	}
	return Parse(b[:n])
}

// Write records code in f (the descriptor the daemon handed over), from
// offset 0, replacing what was there.
func Write(f *os.File, code int) error {
	b := Format(code)
	if _, err := f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("write exit status: %w", err)
	}
	return f.Truncate(int64(len(b)))
}
