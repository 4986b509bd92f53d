package kaudit

import (
	"errors"
	"time"
)

// Watch reads Landlock refusals until Close and hands each to on, from
// one goroutine of its own.
type Watch struct {
	r    *Reader
	done chan struct{}
}

// flushAfter is how long a refusal waits for its EOE record before it is
// handed out without one.
const flushAfter = time.Second

// Start opens a Reader and starts handing out refusals.
func Start(on func(Denial)) (*Watch, error) {
	r, err := Open()
	if err != nil {
		return nil, err
	}
	w := &Watch{r: r, done: make(chan struct{})}
	go w.run(on)
	return w, nil
}

func (w *Watch) run(on func(Denial)) {
	defer close(w.done)
	a := Assembler{Arch: NativeArch(), Names: NativeNames()}
	buf := make([]byte, 1<<16)
	for {
		rec, err := w.r.Read(buf, wanted, 250*time.Millisecond)
		now := time.Now()
		if err == nil {
			for _, d := range a.Add(rec, now) {
				on(d)
			}
		} else if !errors.Is(err, ErrTimeout) {
			for _, d := range a.Flush(now.Add(time.Hour)) {
				on(d)
			}
			return
		}
		for _, d := range a.Flush(now.Add(-flushAfter)) {
			on(d)
		}
	}
}

// Drain waits until the records the kernel has sent so far are handed
// out: a session's command has exited, so its refusals are written, and
// their lines belong before the session's end. It waits at most max.
func (w *Watch) Drain(max time.Duration) {
	// The kernel sends records from its kauditd thread shortly after the
	// refusal; a quiet spell on the socket means they are in.
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		before := w.r.received.Load()
		time.Sleep(50 * time.Millisecond)
		if w.r.received.Load() == before {
			return
		}
	}
}

// Close stops the watch and waits for its goroutine; refusals still
// waiting for their EOE are handed out first.
func (w *Watch) Close() error {
	err := w.r.Close()
	<-w.done
	return err
}

// wanted are the record types a refusal is assembled from.
func wanted(t uint16) bool {
	return t == TypeLandlockAccess || t == TypeLandlockDomain || t == TypeSyscall || t == TypeEOE
}
