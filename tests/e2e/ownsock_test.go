// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/sandbox"
	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

// Issue 9, "sockets created inside the session": every session gets its own
// directory, $TMPDIR, a tmpfs only its mount namespace has, and may reach
// every socket it makes there, at any depth, without listing it.

// ownScript makes a listener under $TMPDIR (two directories down) with one
// process of the session and connects to it from another.
const ownScript = `d="$TMPDIR/a/b"; mkdir -p "$d" || exit 9
PROBE unix-serve "$d/own.sock" & 
for i in $(seq 200); do [ -S "$d/own.sock" ] && break; sleep 0.02; done
PROBE unix "$d/own.sock"
wait`

func TestOwnSocketsWork(t *testing.T) {
	w := newWorld(t)
	requireUnixHooks(t)
	for _, flags := range [][]string{nil, {"--share-processes"}} {
		script := strings.ReplaceAll(ownScript, "PROBE", shq(probeBin(t)))
		run := runSwap(t, w, "", flags, `case "$TMPDIR" in /run/sluice-own/*) ;; *) echo "TMPDIR=$TMPDIR"; exit 8;; esac; `+script)
		rs := probeLines(t, run.Stdout)
		if run.Code != 0 || len(rs) != 2 {
			t.Fatalf("%v: want two probe lines and exit 0\n%v", flags, run)
		}
		for _, r := range rs {
			wantOK(t, r)
		}
		if strings.Contains(run.Stderr, "denied") {
			t.Errorf("%v: a refusal was reported\n%v", flags, run)
		}
	}
}

// Python's multiprocessing forkserver (the default from Python 3.14)
// listens on a socket in a directory it makes under $TMPDIR and connects
// to it from the pool's workers.
func TestOwnSocketsPythonForkserver(t *testing.T) {
	w := newWorld(t)
	requireUnixHooks(t)
	// The system's python3: one from a user's PATH (pyenv shims under
	// /root) is not for uid 65534.
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("/usr/bin/python3 is not installed")
	}
	src := `import multiprocessing as mp
def f(x): return x*x
if __name__ == "__main__":
    mp.set_start_method("forkserver")
    with mp.Pool(2) as p: print(p.map(f, [1,2,3]))
`
	path := filepath.Join(sharedDir(t), "mp.py")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	run := runSwap(t, w, "", nil, shq(py)+" "+shq(path))
	if run.Code != 0 || strings.TrimSpace(run.Stdout) != "[1, 4, 9]" || strings.Contains(run.Stderr, "denied") {
		t.Fatalf("the forkserver pool did not work in a session\n%v", run)
	}
}

// The own directory's names must not lead out of it: a symlink there (to a
// socket or to a directory), a name climbing out with "..", a relative
// name, a hard link or a rename into it. Each runs unconfined first in a
// directory the user may write on the relay's file system (the twin that
// reaches the world through a root relay), then in a session with $TMPDIR
// as the directory, where no probe may get the world's greeting and the
// world must record nothing.
func TestOwnSocketsEscapes(t *testing.T) {
	w := newWorld(t)
	requireUnixHooks(t)
	p := w.ListenTCP(t, world.DeniedV4)
	target := netip.AddrPortFrom(world.DeniedV4, p)
	// Enough to climb from $TMPDIR (/run/sluice-own/N) and from the
	// unconfined twin's directory (TMPBASE/sluice-e2e-X/writable) to "/".
	up := strings.Repeat("/..", 2+strings.Count(tempBase(), "/")+1)
	attacks := []struct {
		name, errno string // errno: how the session's connect fails
		script      func(t *testing.T, s swapSetup, probe string) string
	}{
		{"symlink", "ELOOP", func(t *testing.T, s swapSetup, probe string) string {
			return `ln -s ` + shq(s.relay) + ` "$D/ln.sock"; ` + probe + ` unix "$D/ln.sock"`
		}},
		{"symlinked-dir", "ELOOP", func(t *testing.T, s swapSetup, probe string) string {
			return `ln -s ` + shq(filepath.Dir(s.relay)) + ` "$D/dir"; ` + probe + ` unix "$D/dir/relay.sock"`
		}},
		{"dotdot", "EPERM", func(t *testing.T, s swapSetup, probe string) string {
			return probe + ` unix "$D` + up + s.relay + `"`
		}},
		{"relative", "EPERM", func(t *testing.T, s swapSetup, probe string) string {
			return `cd "$D" && ` + probe + ` unix ".` + up + s.relay + `"`
		}},
		// The link's source is a socket of the user's (as the user's
		// session bus is): protected_hardlinks refuses links to root's.
		{"hardlink", "ENOENT", func(t *testing.T, s swapSetup, probe string) string {
			if err := os.Lchown(s.movable, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return `ln ` + shq(s.movable) + ` "$D/hl.sock"; ` + probe + ` unix "$D/hl.sock"`
		}},
		{"rename", "ECONNREFUSED", func(t *testing.T, s swapSetup, probe string) string {
			return `mv ` + shq(s.movable) + ` "$D/mv.sock"; ` + probe + ` unix "$D/mv.sock"`
		}},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			probe := shq(probeBin(t))
			s := newSwapSetup(t, w, target)
			writable := filepath.Dir(s.movable)
			start := time.Now()
			out := runAsNobody(t, w, s.agent, `D=`+shq(writable)+`; `+a.script(t, s, probe))
			if !reachedRelay(probeLines(t, out)) {
				t.Fatalf("unconfined, the %s attack did not reach the relay, so the test proves nothing: %s", a.name, out)
			}
			wantArrival(t, w, arrived(start, world.DeniedV4, p), "the unconfined attack")
			w.WaitQuiet(world.ToPort(world.DeniedV4, p), 300*time.Millisecond, 3*time.Second)

			for _, flags := range [][]string{nil, {"--share-processes"}} {
				s := newSwapSetup(t, w, target)
				start := time.Now()
				run := runSwap(t, w, s.agent, flags, `D="$TMPDIR"; [ -n "$D" ] || exit 8; `+a.script(t, s, probe))
				if run.Code == 8 {
					t.Fatalf("%v: no TMPDIR in the session\n%v", flags, run)
				}
				rs := probeLines(t, run.Stdout)
				if len(rs) != 1 {
					t.Fatalf("%v: want one probe line\n%v", flags, run)
				}
				// ELOOP: nosymfollow; EPERM: the datapath; ENOENT: ln
				// failed with EXDEV; ECONNREFUSED: mv copied a socket
				// file that no one listens on.
				if rs[0].OK || rs[0].Reply == world.Greeting || rs[0].Errno != a.errno {
					t.Errorf("%v: the %s attack: want %s: %v", flags, a.name, a.errno, run)
				}
				w.AssertNothingArrived(t, arrived(start, world.DeniedV4, p), settle)
			}
		})
	}
}

// A session's own abstract sockets: with process isolation (Landlock's
// abstract-socket scope, ABI 6) a listener one process of the session
// binds is reached by another without listing it, while a root relay's
// abstract socket outside the session is refused, explained as before, and
// the world records nothing. With --share-processes (no Landlock domain)
// the datapath alone judges abstract names: the session's own is refused
// too, explained. Unconfined, the relay reaches the world (the twin).
func TestOwnAbstractSockets(t *testing.T) {
	w := newWorld(t)
	requireUnixHooks(t)
	if sandbox.LandlockABI() < 6 {
		needs.Skip(t, "Landlock ABI %d has no abstract-socket scope (ABI 6, Linux 6.12)", sandbox.LandlockABI())
	}
	p := w.ListenTCP(t, world.DeniedV4)
	relay := w.Relay(t, "unix", randomName("@sluice-e2e-abs-relay-"), netip.AddrPortFrom(world.DeniedV4, p))
	start := time.Now()
	if r := w.RunProbe(t, nobody, "unix", relay); !r.OK || r.Reply != world.Greeting {
		t.Fatalf("unconfined twin through %s: %s", relay, r)
	}
	wantArrival(t, w, arrived(start, world.DeniedV4, p), "the unconfined relay")
	w.WaitQuiet(world.ToPort(world.DeniedV4, p), 300*time.Millisecond, 3*time.Second)

	own := randomName("@sluice-e2e-own-")
	probe := shq(probeBin(t))
	script := probe + ` unix-serve ` + own + ` &
for i in $(seq 200); do out=$(` + probe + ` unix ` + own + `); case "$out" in *'"ok":true'*|*EPERM*) break;; esac; sleep 0.02; done
printf '%s\n' "$out"; ` + probe + ` unix ` + relay + `; kill $! 2>/dev/null; wait`
	// With the machine's audit on, Landlock also logs the scope's
	// refusal; the relay must still get one line, not two.
	for _, c := range []struct {
		name         string
		flags        []string
		ownOK, audit bool
	}{{"isolated", nil, true, false}, {"shared", []string{"--share-processes"}, false, false}, {"isolated-audit", nil, true, true}} {
		t.Run(c.name, func(t *testing.T) {
			if c.audit {
				world.EnableKernelAudit(t)
			}
			start := time.Now()
			run := runSwap(t, w, "", c.flags, script)
			var client, toRelay *world.ProbeResult
			for _, r := range probeLines(t, run.Stdout) {
				if r.Op == "unix" && client == nil {
					client = &r
				} else if r.Op == "unix" {
					toRelay = &r
				}
			}
			if client == nil || toRelay == nil {
				t.Fatalf("%v: want the client's and the relay's probe lines\n%v", c.flags, run)
			}
			if c.ownOK {
				wantOK(t, *client)
				if strings.Contains(run.Stderr, "unix:"+own) {
					t.Errorf("%v: the session's own abstract socket was reported\n%v", c.flags, run)
				}
			} else {
				wantDenied(t, *client, "connect")
				wantDenialLine(t, run.Stderr, "denied", "unix:"+own, unixReason)
			}
			wantDenied(t, *toRelay, "connect")
			wantDenialLine(t, run.Stderr, "denied", "unix:"+relay, unixReason)
			if n := strings.Count(run.Stderr, relay[1:]); n != 1 {
				t.Errorf("%v: %d lines name the relay, want 1\n%v", c.flags, n, run)
			}
			w.AssertNothingArrived(t, arrived(start, world.DeniedV4, p), settle)
		})
	}
}
