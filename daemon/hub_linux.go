package daemon

import (
	"sync"
)

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
