// SPDX-License-Identifier: Apache-2.0

//go:build linux

package world

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Greeting is what the world's TCP servers send to every connection.
const Greeting = "hello\n"

// serverIOTimeout bounds every server-side read and write, so that cleanup
// never waits on a silent client.
const serverIOTimeout = 2 * time.Second

// Contact is one arrival at a world server: an accepted TCP connection or a
// received UDP datagram. The sniffer sees more (packets that no server
// accepts); contacts show what a program could actually talk to.
type Contact struct {
	Time   time.Time
	Proto  uint8 // 6 (TCP) or 17 (UDP)
	Remote netip.AddrPort
	Local  netip.AddrPort
	Data   []byte // UDP: the datagram; TCP: nil
}

// Contacts returns what the world's servers have recorded, oldest first.
func (w *World) Contacts() []Contact {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Contact(nil), w.contacts...)
}

func (w *World) record(c Contact) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.contacts = append(w.contacts, c)
}

// ListenTCP starts a TCP server on addr (a world host) on a port the kernel
// chooses, and returns the port. The server records each connection, sends
// Greeting, reads and discards what the client sends (so that closing does
// not reset the connection under the client's read) and closes. TCP Fast
// Open is enabled on the listener. t.Cleanup stops it.
func (w *World) ListenTCP(t testing.TB, addr netip.Addr) uint16 {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_FASTOPEN, 16)
		}); err != nil {
			return err
		}
		return serr
	}}
	var ln net.Listener
	if err := w.InWorld(func() (err error) {
		ln, err = lc.Listen(context.Background(), network("tcp", addr), netip.AddrPortFrom(addr, 0).String())
		return err
	}); err != nil {
		t.Fatalf("world: TCP server on %v: %v", addr, err)
	}

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by cleanup
			}
			w.record(Contact{
				Time:   time.Now(),
				Proto:  unix.IPPROTO_TCP,
				Remote: addrPort(c.RemoteAddr()),
				Local:  addrPort(c.LocalAddr()),
			})
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
				}()
				_ = c.SetDeadline(time.Now().Add(serverIOTimeout))
				if _, err := io.WriteString(c, Greeting); err != nil {
					return
				}
				_ = c.(*net.TCPConn).CloseWrite()
				_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return addrPort(ln.Addr()).Port()
}

// ListenUDP starts a UDP server on addr (a world host) on a port the kernel
// chooses, and returns the port. The server records each datagram and
// echoes it back. t.Cleanup stops it.
func (w *World) ListenUDP(t testing.TB, addr netip.Addr) uint16 {
	t.Helper()
	var conn *net.UDPConn
	if err := w.InWorld(func() (err error) {
		conn, err = net.ListenUDP(network("udp", addr), net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		return err
	}); err != nil {
		t.Fatalf("world: UDP server on %v: %v", addr, err)
	}
	local := addrPort(conn.LocalAddr())
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 1<<16)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return // closed by cleanup
			}
			from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
			w.record(Contact{
				Time:   time.Now(),
				Proto:  unix.IPPROTO_UDP,
				Remote: from,
				Local:  local,
				Data:   append([]byte(nil), buf[:n]...),
			})
			_, _ = conn.WriteToUDPAddrPort(buf[:n], from)
		}
	})
	t.Cleanup(func() {
		conn.Close()
		wg.Wait()
	})
	return local.Port()
}

// network picks "tcp4"/"tcp6" (or udp) so that the socket family follows the
// address, with no dual-stack surprises.
func network(base string, a netip.Addr) string {
	if a.Is4() {
		return base + "4"
	}
	return base + "6"
}

// addrPort converts a net.Addr from the net package to a netip.AddrPort.
func addrPort(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		panic(fmt.Sprintf("world: unexpected address type %T", a))
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
