// SPDX-License-Identifier: Apache-2.0

//go:build linux

package world

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// maxSettle bounds AssertNothingArrived's wait, whatever a caller passes.
const maxSettle = 5 * time.Second

// sniffer records every IPv4/IPv6 packet that arrives on one interface.
type sniffer struct {
	file *os.File
	done chan struct{}

	mu      sync.Mutex
	packets []Packet
	changed chan struct{} // closed (and replaced) whenever packets grows
	err     error         // a read error that stopped the sniffer early
}

// htons converts a 16-bit value to network byte order as stored in a host
// integer, as sockaddr_ll's protocol wants it.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// startSniffer opens an AF_PACKET socket bound to ifindex; call it inside
// the interface's namespace. The socket is bound before startSniffer
// returns, so every later packet is queued for it.
func startSniffer(ifindex int) (*sniffer, error) {
	// Protocol 0 receives nothing until bind names the protocol and the
	// interface: no packet from another interface can slip in between.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket(AF_PACKET): %w", err)
	}
	// Room for bursts while the reader goroutine is descheduled.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("SO_RCVBUFFORCE: %w", err)
	}
	// Only what arrives from the client, not the world's own replies.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("PACKET_IGNORE_OUTGOING: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding AF_PACKET socket to ifindex %d: %w", ifindex, err)
	}
	// A non-blocking fd joins Go's poller, so closing the file wakes the
	// reader instead of leaving it blocked in recvfrom.
	s := &sniffer{
		file:    os.NewFile(uintptr(fd), "sniffer"),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	rc, err := s.file.SyscallConn()
	if err != nil {
		s.file.Close()
		return nil, fmt.Errorf("sniffer: %w", err)
	}
	go s.run(rc)
	return s, nil
}

// run reads frames until the socket is closed.
func (s *sniffer) run(rc syscall.RawConn) {
	defer close(s.done)
	buf := make([]byte, 1<<16)
	for {
		var (
			n    int
			from unix.Sockaddr
			rerr error
		)
		if err := rc.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_TRUNC)
			return !errors.Is(rerr, unix.EAGAIN)
		}); err != nil {
			return // closed by stop
		}
		// ENETDOWN reports that the interface is or was down (binding to a
		// down interface sets it too); the socket resumes when it comes up.
		if errors.Is(rerr, unix.EINTR) || errors.Is(rerr, unix.ENETDOWN) {
			continue
		}
		if rerr != nil {
			s.mu.Lock()
			s.err = fmt.Errorf("sniffer read: %w", rerr)
			s.mu.Unlock()
			return
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		p, ok := parseFrame(buf[:min(n, len(buf))])
		if !ok || isNoise(p) {
			continue
		}
		p.Time = time.Now()
		s.mu.Lock()
		s.packets = append(s.packets, p)
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
}

// stop closes the socket and waits for the reader.
func (s *sniffer) stop() {
	s.file.Close()
	<-s.done
}

// match returns the recorded packets f selects, a channel closed when more
// arrive, and any error that stopped the sniffer.
func (s *sniffer) match(f Filter) ([]Packet, <-chan struct{}, error) {
	if f == nil {
		f = Everything
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Packet
	for _, p := range s.packets {
		if f(p) {
			out = append(out, p)
		}
	}
	return out, s.changed, s.err
}

// Arrivals returns the packets from the client that f selects (all when f is
// nil), oldest first.
func (w *World) Arrivals(f Filter) []Packet {
	got, _, _ := w.sniffer.match(f)
	return got
}

// WaitArrival waits up to timeout for a packet that f selects and reports
// whether one arrived.
func (w *World) WaitArrival(f Filter, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		got, changed, err := w.sniffer.match(f)
		if len(got) > 0 {
			return true
		}
		if err != nil {
			return false
		}
		select {
		case <-changed:
		case <-timer.C:
			got, _, _ := w.sniffer.match(f)
			return len(got) > 0
		}
	}
}

// AssertNothingArrived waits settle (at most 5s), for packets in flight to
// land, then fails the test, listing them, if any packet f selects arrived.
// It also fails if the sniffer stopped early, since silence would then prove
// nothing.
func (w *World) AssertNothingArrived(t testing.TB, f Filter, settle time.Duration) {
	t.Helper()
	time.Sleep(min(max(settle, 0), maxSettle))
	got, _, err := w.sniffer.match(f)
	if err != nil {
		t.Errorf("world: the sniffer stopped, so silence proves nothing: %v", err)
	}
	if len(got) == 0 {
		return
	}
	lines := make([]string, len(got))
	for i, p := range got {
		lines[i] = "\t" + p.String()
	}
	t.Errorf("world: %d packet(s) arrived that should not have:\n%s", len(got), strings.Join(lines, "\n"))
}

// WaitQuiet waits, at most timeout, until no packet that f selects has
// arrived for quiet, and reports whether that happened. An unconfined twin
// whose connection is still closing (its FIN and last ACK) would otherwise
// be counted against the confined run that follows it on the same port.
func (w *World) WaitQuiet(f Filter, quiet, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		now := time.Now()
		if len(w.Arrivals(All(f, Since(now.Add(-quiet))))) == 0 {
			return true
		}
		if now.After(deadline) {
			return false
		}
		time.Sleep(quiet / 4)
	}
}
