// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDaemonNotifiesReadiness: with $NOTIFY_SOCKET (systemd's Type=notify)
// the daemon sends READY=1, and by then its API socket accepts
// connections, so `systemctl start sluice && sluice run` cannot race it.
// Without the variable (every other test here) it starts as before.
func TestDaemonNotifiesReadiness(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	f.stopDaemon(t)
	path := filepath.Join(f.dir, "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type note struct {
		msg     string
		dialErr error
	}
	got := make(chan note, 1)
	go func() {
		buf := make([]byte, 4096)
		_ = ln.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, _, err := ln.ReadFromUnix(buf)
		if err != nil {
			got <- note{dialErr: err}
			return
		}
		// At once, before anything else: is the API socket there yet?
		c, derr := net.DialTimeout("unix", f.sock, time.Second)
		if derr == nil {
			c.Close()
		}
		got <- note{msg: string(buf[:n]), dialErr: derr}
	}()
	f.env = []string{"NOTIFY_SOCKET=" + path}
	f.startDaemon(t)
	select {
	case n := <-got:
		if !strings.Contains(n.msg, "READY=1") {
			t.Fatalf("notification %q (%v), want READY=1", n.msg, n.dialErr)
		}
		if n.dialErr != nil {
			t.Fatalf("READY=1 came before the API socket accepted: %v", n.dialErr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no notification on $NOTIFY_SOCKET: %s", f.log.String())
	}
}
