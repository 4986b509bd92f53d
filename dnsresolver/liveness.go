// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// A resolver can hold its sockets and still not answer: its process
// stopped (SIGSTOP, a debugger, a frozen cgroup) or its loop stuck. The
// datapath's failover sees a dead resolver by its socket alone, so the
// session's owner probes the resolver through the same loop clients use
// and tells the datapath how long the resolver counts as alive (the
// enforcer's beat). Each UDP listener gets a probe socket of its own,
// connected to it from the listener's network namespace; the listener
// echoes that socket's datagrams (QR set), before any parsing, and nobody
// else's: a client sending the same bytes is answered as any query.

// openProbe connects a probe socket to the listener (in the caller's
// network namespace, the listener's).
func (l *udpListener) openProbe() error {
	addr, ok := l.conn.LocalAddr().(*net.UDPAddr)
	if !ok {
		return errors.New("resolver: listener without a UDP address")
	}
	c, err := net.DialUDP("udp", nil, addr)
	if err != nil {
		return fmt.Errorf("resolver: probe socket for %s: %w", addr, err)
	}
	l.probe = c
	if la, ok := c.LocalAddr().(*net.UDPAddr); ok {
		l.probeFrom = la.AddrPort()
	}
	return nil
}

// isProbe reports a datagram of the listener's own probe socket.
func (l *udpListener) isProbe(from *net.UDPAddr) bool {
	if l.probe == nil || from.Port != int(l.probeFrom.Port()) {
		return false
	}
	a, ok := netip.AddrFromSlice(from.IP)
	return ok && a.Unmap() == l.probeFrom.Addr().Unmap()
}

// Probe sends one datagram through every UDP listener's serving loop and
// waits up to timeout for each echo: nil means the resolver answers.
func (r *Resolver) Probe(timeout time.Duration) error {
	r.mu.Lock()
	udp := r.udp
	r.mu.Unlock()
	if len(udp) == 0 {
		return errors.New("resolver: not listening")
	}
	deadline := time.Now().Add(timeout)
	for _, l := range udp {
		if l.probe == nil {
			continue
		}
		if err := l.probeOnce(deadline); err != nil {
			return err
		}
	}
	return nil
}

// probeOnce sends a DNS header with a fresh id and reads until its echo
// (an older probe's late echo is skipped).
func (l *udpListener) probeOnce(deadline time.Time) error {
	var id [2]byte
	_, _ = rand.Read(id[:])
	msg := make([]byte, 12)
	copy(msg, id[:])
	if err := l.probe.SetDeadline(deadline); err != nil {
		return fmt.Errorf("resolver probe: %w", err)
	}
	if _, err := l.probe.Write(msg); err != nil {
		return fmt.Errorf("resolver probe: %w", err)
	}
	buf := make([]byte, 64)
	for {
		n, err := l.probe.Read(buf)
		if err != nil {
			return fmt.Errorf("resolver probe: no echo: %w", err)
		}
		if n >= 12 && binary.BigEndian.Uint16(buf) == binary.BigEndian.Uint16(id[:]) && buf[2]&0x80 != 0 {
			return nil
		}
	}
}
