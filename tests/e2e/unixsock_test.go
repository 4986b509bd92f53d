// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

// unixReason is sluice's explanation for a refused unix socket.
const unixReason = "not in the allowlist"

// loopbackReason is sluice's explanation for a refused loopback port in
// loopback "session" mode.
const loopbackReason = `loopback "session": not a listener of this session nor in loopback_ports`

// writePolicy writes a network_allowlist.json with the default policy's
// hosts and the extra top-level keys, and returns its path.
func writePolicy(t *testing.T, extra map[string]any) string {
	t.Helper()
	doc := map[string]any{"allowed_hosts": defaultPolicy}
	for k, v := range extra {
		doc[k] = v
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sharedDir(t), "network_allowlist.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func randomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// TestUnixSocketRelay: a root service outside the session that dials the
// world for whoever connects to its unix socket (like docker.sock) is
// refused on its pathname and on an abstract twin, with an explained line
// and an audit line, and the world records nothing; listed in
// unix_sockets (exactly or by a glob), it works. Unconfined, the same user
// reaches the world through it.
func TestUnixSocketRelay(t *testing.T) {
	w := newWorld(t)
	requireUnixHooks(t)
	p := w.ListenTCP(t, world.DeniedV4)
	target := netip.AddrPortFrom(world.DeniedV4, p)
	dir := sharedDir(t)
	path := w.Relay(t, "unix", filepath.Join(dir, "relay.sock"), target)
	abstract := w.Relay(t, "unix", randomName("@sluice-e2e-relay-"), target)

	for _, name := range []string{path, abstract} {
		t.Run(strings.TrimPrefix(filepath.Base(name), "@"), func(t *testing.T) {
			// The twin: outside sluice the relay carries the user's
			// connection to the world.
			start := time.Now()
			r := w.RunProbe(t, nobody, "unix", name)
			wantOK(t, r)
			if r.Reply != world.Greeting {
				t.Errorf("unconfined reply %q, want the world's greeting", r.Reply)
			}
			wantArrival(t, w, arrived(start, world.DeniedV4, p), "the unconfined relay")
			w.WaitQuiet(world.ToPort(world.DeniedV4, p), 300*time.Millisecond, 3*time.Second)

			audit := filepath.Join(t.TempDir(), "audit.jsonl")
			start = time.Now()
			r, run := confinedProbe(t, w, defaultPolicy, []string{"--audit-log", audit}, "unix", name)
			wantDenied(t, r, "connect")
			wantDenialLine(t, run.Stderr, "denied", "unix:"+name, unixReason)
			w.AssertNothingArrived(t, arrived(start, world.DeniedV4, p), settle)
			found := false
			for _, e := range world.ReadAuditLog(t, audit) {
				if e["type"] == "egress_denied" && e["dst"] == "unix:"+name && e["proto"] == "unix" && e["reason"] == unixReason && e["comm"] == "probe" {
					found = true
				}
			}
			if !found {
				t.Errorf("no egress_denied audit line for unix:%s", name)
			}

			start = time.Now()
			policy := writePolicy(t, map[string]any{"unix_sockets": []string{name}})
			r, _ = confinedProbe(t, w, nil, []string{"--allowlist", policy}, "unix", name)
			wantOK(t, r)
			wantArrival(t, w, arrived(start, world.DeniedV4, p), "the listed relay")
		})
	}

	t.Run("glob", func(t *testing.T) {
		start := time.Now()
		policy := writePolicy(t, map[string]any{"unix_sockets": []string{filepath.Join(dir, "*.sock")}})
		r, _ := confinedProbe(t, w, nil, []string{"--allowlist", policy}, "unix", path)
		wantOK(t, r)
		wantArrival(t, w, arrived(start, world.DeniedV4, p), "the relay listed by a glob")
		// A symlink is another name: not listed, refused.
		link := filepath.Join(dir, "link", "relay.sock")
		if err := os.Mkdir(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(path, link); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		r, _ = confinedProbe(t, w, nil, []string{"--allowlist", policy}, "unix", link)
		wantDenied(t, r, "connect")
		w.AssertNothingArrived(t, arrived(start, world.DeniedV4, p), settle)
	})

	t.Run("learn", func(t *testing.T) {
		out := filepath.Join(sharedDir(t), "learned.json")
		run := runSluice(t, w, append([]string{"learn", "--user", nobodyUser, "-o", out, "--"}, probeBin(t), "unix", path)...)
		if run.Code != 0 {
			t.Fatalf("sluice learn: %v", run)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Unix []string `json:"unix_sockets"`
		}
		if err := json.Unmarshal(b, &doc); err != nil || len(doc.Unix) != 1 || doc.Unix[0] != path {
			t.Errorf("learned allowlist %s: want unix_sockets [%s] (%v)", b, path, err)
		}
	})
}

// TestUnixSocketBuiltins: the built-in list keeps working: $SSH_AUTH_SOCK
// (an agent that only signs) is reachable without listing it, and the
// journal and syslog sockets are never refused by sluice (where the
// machine has none, the kernel answers ENOENT).
func TestUnixSocketBuiltins(t *testing.T) {
	w := newWorld(t)
	requireUnixHooks(t)
	dir := sharedDir(t)
	agent := filepath.Join(dir, "agent.sock")
	var ln net.Listener
	if err := w.InClient(func() (err error) { ln, err = net.Listen("unix", agent); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(agent, 0o666); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("agent\n"))
			c.Close()
		}
	}()
	script := probeLine(t, "unix", agent) + "; " + probeLine(t, "unix-dgram", "/dev/log") + "; " +
		probeLine(t, "unix-dgram", "/run/systemd/journal/socket") + "; " + probeLine(t, "unix", "/run/systemd/journal/stdout")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := sluiceCmd(ctx, w, runArgs(defaultPolicy, nil, "sh", "-c", script)...)
	cmd.Env = append(cmd.Env, "SSH_AUTH_SOCK="+agent)
	out, err := cmd.Output()
	t.Logf("%s (%v)", out, err)
	rs := probeLines(t, string(out))
	if len(rs) != 4 {
		t.Fatalf("want 4 probe lines, got %d", len(rs))
	}
	wantOK(t, rs[0])
	for _, r := range rs[1:] {
		if r.Errno == "EPERM" {
			t.Errorf("a built-in socket was refused: %v", r)
		}
	}
	// Without SSH_AUTH_SOCK naming it, the same socket is refused.
	r, run := confinedProbe(t, w, defaultPolicy, nil, "unix", agent)
	wantDenied(t, r, "connect")
	wantDenialLine(t, run.Stderr, "denied", "unix:"+agent, unixReason)
}

// TestLoopbackSessionMode: with "loopback": "session" a loopback relay
// outside the session (root, dialling the world for whoever connects) is
// refused with an explanation and the world records nothing, while a
// listener the session creates and a port in loopback_ports work; with the
// default both work.
func TestLoopbackSessionMode(t *testing.T) {
	w := newWorld(t)
	p := w.ListenTCP(t, world.DeniedV4)
	relay := netip.MustParseAddrPort(w.Relay(t, "tcp", "127.0.0.1:0", netip.AddrPortFrom(world.DeniedV4, p)))
	pa := w.ListenTCP(t, world.AllowedV4)
	listed := netip.MustParseAddrPort(w.Relay(t, "tcp", "127.0.0.1:0", netip.AddrPortFrom(world.AllowedV4, pa)))
	lo := "127.0.0.1"

	// The twin: unconfined, the relay reaches the world.
	start := time.Now()
	wantOK(t, w.RunProbe(t, nobody, "tcp", lo, port(relay.Port())))
	wantArrival(t, w, arrived(start, world.DeniedV4, p), "the unconfined loopback relay")

	t.Run("default", func(t *testing.T) {
		start := time.Now()
		script := probeLine(t, "tcp", lo, port(relay.Port())) + "; " + probeLine(t, "tcp", lo, port(listed.Port())) + "; " + probeLine(t, "tcp-self")
		run := shellCommand(t, w, defaultPolicy, nil, script)
		rs := probeLines(t, run.Stdout)
		if len(rs) != 3 {
			t.Fatalf("want 3 probe lines\n%v", run)
		}
		for _, r := range rs {
			wantOK(t, r)
		}
		wantArrival(t, w, arrived(start, world.DeniedV4, p), "the loopback relay in the default mode")
		w.WaitQuiet(world.ToPort(world.DeniedV4, p), 300*time.Millisecond, 3*time.Second)
	})

	t.Run("session", func(t *testing.T) {
		policy := writePolicy(t, map[string]any{"loopback": "session", "loopback_ports": []int{int(listed.Port())}})
		start := time.Now()
		r, run := confinedProbe(t, w, nil, []string{"--allowlist", policy}, "tcp", lo, port(relay.Port()))
		wantDenied(t, r, "connect")
		wantDenialLine(t, run.Stderr, "denied", dest(netip.MustParseAddr(lo), relay.Port(), "tcp"), loopbackReason)
		w.AssertNothingArrived(t, arrived(start, world.DeniedV4, p), settle)

		script := probeLine(t, "tcp", lo, port(listed.Port())) + "; " + probeLine(t, "tcp-self")
		run = shellCommand(t, w, nil, []string{"--allowlist", policy}, script)
		rs := probeLines(t, run.Stdout)
		if len(rs) != 2 {
			t.Fatalf("want 2 probe lines\n%v", run)
		}
		for _, r := range rs {
			wantOK(t, r)
		}
	})
}

// requireUnixHooks skips (fails under SLUICE_REQUIRE_KERNEL) on a kernel
// without the cgroup connect_unix/sendmsg_unix hooks (before 6.7).
func requireUnixHooks(t *testing.T) {
	t.Helper()
	if err := loader.ProbeUnix(); err != nil {
		needs.Skip(t, "%v", err)
	}
}
