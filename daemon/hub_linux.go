// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"sync"

	"github.com/sluice-dev/sluice/audit"
)

// hub fans events out to streaming clients (GET /v1/events). A slow
// subscriber loses events rather than slowing the daemon down.
type hub struct {
	mu   sync.Mutex
	subs map[chan audit.Event]func(audit.Event) bool
}

func newHub() *hub { return &hub{subs: map[chan audit.Event]func(audit.Event) bool{}} }

func (h *hub) subscribe(filter func(audit.Event) bool) chan audit.Event {
	ch := make(chan audit.Event, 256)
	h.mu.Lock()
	h.subs[ch] = filter
	h.mu.Unlock()
	return ch
}

func (h *hub) unsubscribe(ch chan audit.Event) {
	h.mu.Lock()
	delete(h.subs, ch)
	h.mu.Unlock()
}

func (h *hub) publish(e audit.Event) {
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
