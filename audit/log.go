// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Log writes JSON lines (docs/audit.md): the daemon's log, and
// `sluice run --audit-log`. It is reopened on SIGHUP so logrotate can move
// it away. Lines never carry secrets: no environment, no command arguments
// beyond argv[0]... see docs/audit.md.
type Log struct {
	mu   sync.Mutex
	path string
	f    *os.File
	enc  *json.Encoder
}

// OpenLog opens (appending, mode 0600) or creates the log at path; ""
// gives a log that writes nothing.
func OpenLog(path string) (*Log, error) {
	a := &Log{path: path}
	if path == "" {
		return a, nil
	}
	if err := a.Reopen(); err != nil {
		return nil, err
	}
	return a, nil
}

// Reopen closes and reopens the file at the configured path.
func (a *Log) Reopen() error {
	if a.path == "" {
		return nil
	}
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f != nil {
		a.f.Close()
	}
	a.f, a.enc = f, json.NewEncoder(f)
	return nil
}

// Write appends one event.
func (a *Log) Write(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.enc != nil {
		_ = a.enc.Encode(e)
	}
}

// Close closes the file.
func (a *Log) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f, a.enc = nil, nil
	return err
}
