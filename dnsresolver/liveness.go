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
// bound in the listener's network namespace; the listener echoes that
// socket's datagrams (QR set), before any parsing, and nobody else's: a
// client sending the same bytes is answered as any query.
//
// The probe socket is bound, not connected: a container's namespace can
// still have its loopback down while the daemon attaches it (Docker brings
// lo up from a hook while runc's init waits), and a connect then fails
// with ENETUNREACH where a bind succeeds. Until lo is up the probes fail,
// which is the truth: the resolver cannot be reached yet.

// openProbe binds a probe socket beside the listener (in the caller's
// network namespace, the listener's).
func (l *udpListener) openProbe() error {
	addr, ok := l.conn.LocalAddr().(*net.UDPAddr)
	if !ok {
		return errors.New("resolver: listener without a UDP address")
	}
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: addr.IP, Zone: addr.Zone})
	if err != nil {
		return fmt.Errorf("resolver: probe socket for %s: %w", addr, err)
	}
	l.probe = c
	l.probeTo = addr.AddrPort()
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
	if _, err := l.probe.WriteToUDPAddrPort(msg, l.probeTo); err != nil {
		return fmt.Errorf("resolver probe: %w", err)
	}
	buf := make([]byte, 64)
	for {
		n, from, err := l.probe.ReadFromUDPAddrPort(buf)
		if err != nil {
			return fmt.Errorf("resolver probe: no echo: %w", err)
		}
		if from.Port() != l.probeTo.Port() || from.Addr().Unmap() != l.probeTo.Addr().Unmap() {
			continue // not the listener's: ignored
		}
		if n >= 12 && binary.BigEndian.Uint16(buf) == binary.BigEndian.Uint16(id[:]) && buf[2]&0x80 != 0 {
			return nil
		}
	}
}
