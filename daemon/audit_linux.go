package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// auditLog writes JSON lines (docs/audit.md). It is reopened on SIGHUP so
// logrotate can move it away. Lines never carry secrets: no environment,
// no command arguments beyond argv[0]... see docs/audit.md.
type auditLog struct {
	mu   sync.Mutex
	path string
	f    *os.File
	enc  *json.Encoder
}

func openAudit(path string) (*auditLog, error) {
	a := &auditLog{path: path}
	if path == "" {
		return a, nil
	}
	if err := a.Reopen(); err != nil {
		return nil, err
	}
	return a, nil
}

// Reopen closes and reopens the file at the configured path.
func (a *auditLog) Reopen() error {
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
func (a *auditLog) Write(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.enc != nil {
		_ = a.enc.Encode(e)
	}
}

func (a *auditLog) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f, a.enc = nil, nil
	return err
}

// hub fans events out to streaming clients (GET /v1/events). A slow
// subscriber loses events rather than slowing the daemon down.
type hub struct {
	mu   sync.Mutex
	subs map[chan Event]func(Event) bool
}

func newHub() *hub { return &hub{subs: map[chan Event]func(Event) bool{}} }

func (h *hub) subscribe(filter func(Event) bool) chan Event {
	ch := make(chan Event, 256)
	h.mu.Lock()
	h.subs[ch] = filter
	h.mu.Unlock()
	return ch
}

func (h *hub) unsubscribe(ch chan Event) {
	h.mu.Lock()
	delete(h.subs, ch)
	h.mu.Unlock()
}

func (h *hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch, f := range h.subs {
		if f(e) {
			select {
			case ch <- e:
			default:
			}
		}
	}
}
