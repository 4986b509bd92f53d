// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/sandbox"
	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

// TestDaemonOwnSockets: a daemon session gets its own $TMPDIR (a tmpfs in
// the session's mount namespace, built from the caller's view), where a
// socket one of its processes makes is reached by another and Python's
// forkserver pool works; a symlink there to a root relay outside the
// session and a name climbing out of it with ".." are refused and the
// world records nothing. Unconfined, the same names reach the world (the
// twin).
func TestDaemonOwnSockets(t *testing.T) {
	requireUnixHooks(t)
	f := newFixture(t, "203.0.113.10")
	target := netip.AddrPortFrom(world.DeniedV4, f.denied)
	relay := f.w.Relay(t, "unix", filepath.Join(f.dir, "relay.sock"), target)
	probe := world.BuildProbe(t)
	// Enough to climb to "/" from $TMPDIR (/run/sluice-own/N) and from
	// the twin's directory (/tmp/own-X: short, to fit in sun_path).
	up := strings.Repeat("/..", 3)
	escape := `ln -s ` + relay + ` "$D/ln.sock"; ` + probe + ` unix "$D/ln.sock"; ` + probe + ` unix "$D` + up + relay + `"`

	t.Run("unconfined", func(t *testing.T) {
		dir, err := os.MkdirTemp("/tmp", "own-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		cmd := exec.Command("sh", "-c", `D=`+dir+`; `+escape)
		cmd.SysProcAttr = nobody
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := f.w.StartInClient(cmd); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		reached := 0
		for line := range strings.Lines(out.String()) {
			if r, err := world.ParseProbeResult([]byte(line)); err == nil && r.OK && r.Reply == world.Greeting {
				reached++
			}
		}
		if reached != 2 {
			t.Fatalf("unconfined, %d of the 2 names reached the relay, so the test proves nothing: %s", reached, out.String())
		}
		if !f.w.WaitArrival(world.All(world.Since(start), world.ToPort(world.DeniedV4, f.denied)), 2*time.Second) {
			t.Fatalf("the unconfined names reached nothing")
		}
		f.w.WaitQuiet(world.ToPort(world.DeniedV4, f.denied), 300*time.Millisecond, 3*time.Second)
	})
	t.Run("session", func(t *testing.T) {
		start := time.Now()
		out, stderr, _ := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", `D="$TMPDIR"; [ -n "$D" ] || exit 8; `+escape)
		var rs []world.ProbeResult
		for line := range strings.Lines(out) {
			if r, err := world.ParseProbeResult([]byte(line)); err == nil {
				rs = append(rs, r)
			}
		}
		if len(rs) != 2 || rs[0].Errno != "ELOOP" || rs[1].Errno != "EPERM" {
			t.Errorf("the symlink and '..' names from the own directory: want ELOOP and EPERM: %s\n%s", out, stderr)
		}
		f.w.AssertNothingArrived(t, world.All(world.Since(start), world.ToPort(world.DeniedV4, f.denied)), 300*time.Millisecond)
	})
	t.Run("own", func(t *testing.T) {
		script := `d="$TMPDIR/a/b"; mkdir -p "$d" || exit 9
` + probe + ` unix-serve "$d/own.sock" &
for i in $(seq 200); do [ -S "$d/own.sock" ] && break; sleep 0.02; done
` + probe + ` unix "$d/own.sock"
wait`
		out, stderr, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
		n := 0
		for line := range strings.Lines(out) {
			if r, err := world.ParseProbeResult([]byte(line)); err == nil && r.OK {
				n++
			}
		}
		if code != 0 || n != 2 {
			t.Errorf("a listener under the session's own $TMPDIR: exit %d, %d of 2 probes ok\n%s\n%s", code, n, out, stderr)
		}
	})
	// The session's own abstract socket (left to Landlock's scope) is
	// reached; a root relay's, outside the session, is refused with the
	// line on the client's terminal, once.
	t.Run("abstract", func(t *testing.T) {
		if sandbox.LandlockABI() < 6 {
			needs.Skip(t, "Landlock ABI %d has no abstract-socket scope (ABI 6, Linux 6.12)", sandbox.LandlockABI())
		}
		abs := f.w.Relay(t, "unix", fmt.Sprintf("@sluice-d2e-abs-%d", time.Now().UnixNano()), target)
		own := fmt.Sprintf("@sluice-d2e-own-%d", time.Now().UnixNano())
		twin := time.Now()
		if r := f.w.RunProbe(t, nobody, "unix", abs); !r.OK || r.Reply != world.Greeting {
			t.Fatalf("unconfined twin through %s: %s", abs, r)
		}
		if !f.w.WaitArrival(world.All(world.Since(twin), world.ToPort(world.DeniedV4, f.denied)), 2*time.Second) {
			t.Fatalf("the unconfined relay %s reached nothing", abs)
		}
		f.w.WaitQuiet(world.ToPort(world.DeniedV4, f.denied), 300*time.Millisecond, 3*time.Second)
		script := probe + ` unix-serve ` + own + ` &
for i in $(seq 200); do out=$(` + probe + ` unix ` + own + `); case "$out" in *'"ok":true'*|*EPERM*) break;; esac; sleep 0.02; done
printf '%s\n' "$out"; ` + probe + ` unix ` + abs + `; kill $! 2>/dev/null; wait`
		start := time.Now()
		out, stderr, _ := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
		var rs []world.ProbeResult
		for line := range strings.Lines(out) {
			if r, err := world.ParseProbeResult([]byte(line)); err == nil && r.Op == "unix" {
				rs = append(rs, r)
			}
		}
		if len(rs) != 2 || !rs[0].OK || rs[1].OK || rs[1].Errno != "EPERM" {
			t.Errorf("own abstract socket, then the relay's: want ok, then EPERM: %s\n%s", out, stderr)
		}
		if strings.Contains(stderr, own[1:]) || strings.Count(stderr, abs[1:]) != 1 || !strings.Contains(stderr, "-> unix:"+abs+": not in the allowlist") {
			t.Errorf("want one line for the relay and none for the session's own socket:\n%s", stderr)
		}
		f.w.AssertNothingArrived(t, world.All(world.Since(start), world.ToPort(world.DeniedV4, f.denied)), 300*time.Millisecond)
	})
	t.Run("forkserver", func(t *testing.T) {
		py := "/usr/bin/python3"
		if _, err := os.Stat(py); err != nil {
			t.Skip("/usr/bin/python3 is not installed")
		}
		src := filepath.Join(f.dir, "mp.py")
		f.writeFile(t, src, []byte("import multiprocessing as mp\ndef f(x): return x*x\nif __name__ == \"__main__\":\n    mp.set_start_method(\"forkserver\")\n    with mp.Pool(2) as p: print(p.map(f, [1,2,3]))\n"))
		out, stderr, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", py, src)
		if code != 0 || strings.TrimSpace(out) != "[1, 4, 9]" || strings.Contains(stderr, "denied") {
			t.Errorf("the forkserver pool in a daemon session: exit %d\n%s\n%s", code, out, stderr)
		}
	})
}
