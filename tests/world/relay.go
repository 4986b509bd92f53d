// SPDX-License-Identifier: Apache-2.0

//go:build linux

package world

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Relay starts what a confined program would abuse to reach the world
// without its own sockets: a service run by root in the client namespace,
// outside any session, that dials TCP to to on behalf of whoever connects
// to it and hands back what the world's server said (docker.sock, a
// systemd manager, a local proxy do the same). network is "unix" (listen
// is a path, or "@name" for an abstract socket, which lives in the client
// namespace) or "tcp" (listen is a loopback address; port 0 lets the
// kernel choose). It returns the address it listens on ("@name" for an
// abstract socket); t.Cleanup stops it. Every dial is bounded.
func (w *World) Relay(t testing.TB, network, listen string, to netip.AddrPort) string {
	t.Helper()
	if !Safe(to.Addr()) {
		t.Fatalf("world: refusing to relay to %v: only loopback and the test ranges are allowed", to)
	}
	addr := listen
	if a, ok := strings.CutPrefix(listen, "@"); ok && network == "unix" {
		addr = "\x00" + a
	}
	var ln net.Listener
	if err := w.InClient(func() (err error) {
		ln, err = net.Listen(network, addr)
		return err
	}); err != nil {
		t.Fatalf("world: relay on %s %s: %v", network, listen, err)
	}
	if network == "unix" && !strings.HasPrefix(listen, "@") {
		// Anyone may connect, as to docker.sock for members of its group.
		if err := os.Chmod(listen, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by cleanup
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(serverIOTimeout))
				var up net.Conn
				if err := w.InClient(func() (err error) {
					up, err = net.DialTimeout("tcp", to.String(), serverIOTimeout)
					return err
				}); err != nil {
					fmt.Fprintf(c, "relay: %v\n", err)
					return
				}
				defer up.Close()
				_ = up.SetDeadline(time.Now().Add(serverIOTimeout))
				_, _ = io.Copy(c, io.LimitReader(up, 1<<10))
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	if network == "unix" {
		return listen
	}
	return ln.Addr().String()
}
