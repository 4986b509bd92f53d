// SPDX-License-Identifier: Apache-2.0

package kaudit

import (
	"errors"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Watch reads Landlock refusals until Close and hands each to on, from
// one goroutine of its own.
type Watch struct {
	r    *Reader
	done chan struct{}
	// own counts the AUDIT_EVENT_LISTENER records about this process
	// (its joins and leaves of the multicast group), which Drain uses as
	// markers; seen is signalled at each.
	own  atomic.Int64
	seen chan struct{}
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
	w := &Watch{r: r, done: make(chan struct{}), seen: make(chan struct{}, 1)}
	go w.run(on)
	return w, nil
}

func (w *Watch) run(on func(Denial)) {
	defer close(w.done)
	a := Assembler{Arch: NativeArch(), Names: NativeNames()}
	buf := make([]byte, 1<<16)
	me := strconv.Itoa(os.Getpid())
	for {
		rec, err := w.r.Read(buf, wanted, 250*time.Millisecond)
		now := time.Now()
		if err == nil && rec.Type == typeEventListener {
			if rec.Get("pid") == me {
				w.own.Add(1)
				select {
				case w.seen <- struct{}{}:
				default:
				}
			}
			continue
		}
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

// Drain waits until the records the kernel has queued so far are handed
// out: a session's command has exited, so its refusals are queued, and
// their lines belong before the session's end. The kernel sends records in
// the order it queued them, so Drain queues a marker of its own (it joins
// and leaves the multicast group with a second socket, which the kernel
// records as AUDIT_EVENT_LISTENER about this process) and waits for it. It
// waits at most max (audit off: no marker comes).
func (w *Watch) Drain(max time.Duration) {
	// Joining makes one record and leaving another; the watch's own join
	// may not have been read yet, so the marker is the second record
	// about this process from now on.
	target := w.own.Load() + 2
	fd, err := auditSocket()
	if err != nil {
		return
	}
	err = unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (nlgrpReadlog - 1)})
	unix.Close(fd)
	if err != nil {
		return
	}
	timer := time.NewTimer(max)
	defer timer.Stop()
	for w.own.Load() < target {
		select {
		case <-w.seen:
		case <-timer.C:
			return
		}
	}
	// The records read before the marker are handed out by now: the
	// watch reads and hands out in order, on one goroutine, and counted
	// the marker after everything before it.
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
	return t == TypeLandlockAccess || t == TypeLandlockDomain || t == TypeSyscall || t == TypeEOE || t == typeEventListener
}
