// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// TestInheritedSocketNotPassed: a TCP connection to a denied world host,
// opened outside any session (a CI runner's, an editor's) and inherited by
// sluice as descriptor 3, is not the command's: writing to descriptor 3
// fails and the world records nothing. With --preserve-fds 1 (the twin)
// the same write reaches the world, which shows what the default closes:
// the socket is not the session's, so the datapath never judges it.
func TestInheritedSocketNotPassed(t *testing.T) {
	w := newWorld(t)
	var ln net.Listener
	if err := w.InWorld(func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(world.DeniedV4, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	dst := ln.Addr().String()
	script := `if echo leaked >&3; then echo wrote; else echo refused; fi`
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"default", nil, "refused"},
		{"preserve-fds", []string{"--preserve-fds", "1"}, "wrote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conn net.Conn
			if err := w.InClient(func() (err error) {
				conn, err = net.DialTimeout("tcp", dst, 5*time.Second)
				return err
			}); err != nil {
				t.Fatalf("outside the session, connect to %v: %v", dst, err)
			}
			defer conn.Close()
			peer, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			f, err := conn.(*net.TCPConn).File()
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r := runInheriting(t, w, []*os.File{f}, runArgs(defaultPolicy, tc.flags, "sh", "-c", script)...)
			if r.Code != 0 || strings.TrimSpace(r.Stdout) != tc.want {
				t.Fatalf("the command with an inherited socket at 3: want %q: %v", tc.want, r)
			}
			// What the world's end of the connection received: the
			// write, or nothing once the run is over and the
			// test's own copies are closed.
			f.Close()
			conn.Close()
			_ = peer.SetReadDeadline(time.Now().Add(waitBound))
			got, err := io.ReadAll(peer)
			if err != nil {
				t.Fatalf("the world's end of the connection: %v", err)
			}
			if (tc.want == "wrote") != (string(got) == "leaked\n") || (tc.want == "refused" && len(got) > 0) {
				t.Errorf("the world received %q through the inherited socket (%s)", got, tc.name)
			}
		})
	}
}

// runInheriting is runSluice with extra descriptors (3, 4, ...) passed to
// sluice, as a parent that leaks them would.
func runInheriting(t *testing.T, w *world.World, files []*os.File, args ...string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := sluiceCmd(ctx, w, args...)
	cmd.ExtraFiles = files
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := runResult{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("sluice %s: %v", strings.Join(args, " "), err)
	}
	t.Logf("sluice %s\n%v", strings.Join(args, " "), r)
	return r
}
