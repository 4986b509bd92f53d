// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// fileCommands are a step's private copies of the runner's file
// commands: real is the runner's path for each variable the runner set,
// private the copy the step writes.
type fileCommands struct {
	dir     string
	real    map[string]string
	private map[string]string
}

// newFileCommands makes empty private copies, in a directory of their
// own below base (the runner's temp directory, which the step may
// write), of the file commands the runner gave this step.
func newFileCommands(base string) (*fileCommands, error) {
	fc := &fileCommands{real: map[string]string{}, private: map[string]string{}}
	for _, v := range fileCommandVars {
		if p := os.Getenv(v); p != "" {
			fc.real[v] = p
		}
	}
	if len(fc.real) == 0 {
		return fc, nil
	}
	if base == "" {
		base = os.TempDir()
	}
	dir, err := os.MkdirTemp(base, "sluice-step-")
	if err != nil {
		return nil, fmt.Errorf("the step's file commands: %w", err)
	}
	fc.dir = dir
	for v := range fc.real {
		p := filepath.Join(dir, strings.ToLower(v))
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			fc.remove()
			return nil, fmt.Errorf("the step's file commands: %w", err)
		}
		fc.private[v] = p
	}
	return fc, nil
}

// env points the step's environment at the private copies.
func (fc *fileCommands) env(env []string) []string {
	for v, p := range fc.private {
		env = withEnv(env, v, p)
	}
	return env
}

// apply appends what the step wrote to its private copies to the
// runner's files: $GITHUB_ENV and $GITHUB_PATH filtered, with a line on
// log for each entry dropped, the others as they are.
func (fc *fileCommands) apply(log io.Writer, protected []string, writable func(string) bool) error {
	for _, v := range fileCommandVars {
		p, ok := fc.private[v]
		if !ok {
			continue
		}
		b, err := readSmall(p)
		if err != nil {
			return fmt.Errorf("$%s: %w", v, err)
		}
		if len(b) == 0 {
			continue
		}
		var dropped []string
		switch v {
		case "GITHUB_ENV":
			b, dropped = filterEnv(b)
		case "GITHUB_PATH":
			b, dropped = filterPath(b, protected, writable)
		}
		for _, d := range dropped {
			fmt.Fprintf(log, "sluice-shell: dropped from $%s (later steps run outside this step's session): %s\n", v, d)
		}
		if len(b) == 0 {
			continue
		}
		f, err := os.OpenFile(fc.real[v], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("$%s: %w", v, err)
		}
		_, werr := f.Write(b)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("$%s: %w", v, werr)
		}
	}
	return nil
}

// maxFileCommand bounds what is read of a private copy: the runner
// itself takes at most 1 MiB of a step's summary.
const maxFileCommand = 16 << 20

// readSmall reads a private copy, which must be a regular file (a step
// could have replaced it with a FIFO or a link to something else).
func readSmall(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileCommand+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileCommand {
		return nil, fmt.Errorf("%s: over %d bytes", p, maxFileCommand)
	}
	return b, nil
}

// remove removes the private copies.
func (fc *fileCommands) remove() {
	if fc.dir != "" {
		_ = os.RemoveAll(fc.dir)
	}
}

// writableByMe reports whether this process (the job's user, outside any
// session) may write dir.
func writableByMe(dir string) bool {
	return unix.Access(dir, unix.W_OK) == nil
}

// readProtected reads the paths every session of the job sees read-only,
// from the root-owned control directory (one a line); none when there is
// no such file.
func readProtected(ctl string) []string {
	if ctl == "" {
		return nil
	}
	f, err := os.Open(filepath.Join(ctl, "protected"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p := sc.Text(); filepath.IsAbs(p) {
			out = append(out, filepath.Clean(p))
		}
	}
	return out
}
