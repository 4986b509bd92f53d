// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// roTryScript tries, as the session's user, every way of changing what is
// below each directory it is given ($1 ...; each holds a file f and a
// directory sub with a file g) and prints "NAME DIR ok" or "NAME DIR
// refused" per attempt; $BESIDE is a directory next to them that must stay
// writable. The user-namespace attempts remount, rebind or unmount the
// path first (with --propagation unchanged: unshare's default makes /
// private, itself a mount that a Landlock domain refuses before the
// attempt is made); "userns -" says whether a user namespace could be
// made at all.
const roTryScript = `try() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n $D ok"; else echo "$n $D refused"; fi; }
for D in "$@"; do
  try write sh -c 'echo x >> "$0/f"' "$D"
  try create sh -c 'echo x > "$0/new"' "$D"
  try mkdir mkdir "$D/newdir"
  try chmod chmod 600 "$D/f"
  try rename mv "$D/f" "$D/f2"
  try unlink rm "$D/sub/g"
  try userns-remount unshare -rm --propagation unchanged sh -c 'mount -o remount,bind,rw "$0" && echo x >> "$0/f"' "$D"
  try userns-rebind unshare -rm --propagation unchanged sh -c 'mount --bind "$0" "$0" && mount -o remount,bind,rw "$0" && echo x >> "$0/f"' "$D"
  try userns-umount unshare -rm --propagation unchanged sh -c 'umount -l "$0" && echo x > "$0/f"' "$D"
  try rename-self mv "$D" "$D.moved"
done
D=$BESIDE; try beside sh -c 'echo x > "$0/new"' "$BESIDE"
D=-; try userns unshare -rm --propagation unchanged true
`

// roOps are the attempts roTryScript makes on each read-only path that
// the twin outside a session can make too (remount and umount need a
// mount there, which only the session has).
var roOps = []string{"write", "create", "mkdir", "chmod", "rename", "unlink", "userns-rebind", "rename-self"}

// roDir makes dir (f, sub/g in it), all of uid 65534's.
func roDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "f"), filepath.Join(dir, "sub", "g")} {
		if err := os.WriteFile(p, []byte("orig\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{dir, filepath.Join(dir, "sub"), filepath.Join(dir, "f"), filepath.Join(dir, "sub", "g")} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
}

// wantRefused checks every attempt in out on each of dirs was refused,
// and the directory beside them was writable.
func wantRefused(t *testing.T, who, out string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		for _, op := range append([]string{"userns-remount", "userns-umount"}, roOps...) {
			if !strings.Contains(out, op+" "+d+" refused\n") {
				t.Errorf("%s: %s below the read-only %s was not refused:\n%s", who, op, d, out)
			}
		}
		if b, err := os.ReadFile(filepath.Join(d, "f")); err != nil || string(b) != "orig\n" {
			t.Errorf("%s: %s/f changed: %q %v", who, d, b, err)
		}
	}
	if !strings.Contains(out, "beside "+filepath.Dir(dirs[0])+"/beside ok\n") {
		t.Errorf("%s: the directory beside the read-only paths was not writable:\n%s", who, out)
	}
	// The user-namespace attempts prove something only if one can be made.
	if !strings.Contains(out, "userns - ok\n") {
		t.Errorf("%s: unshare -rm --propagation unchanged itself failed, so the remount attempts prove nothing:\n%s", who, out)
	}
}

// TestReadOnlyPaths: with the daemon's --read-only PATH and a session's
// own --read-only PATH, uid 65534 (a member of the daemon's group) can
// write, create, rename, unlink or chmod nothing below either, rename
// neither away, nor undo them from a user namespace (unshare -rm, with
// process isolation and with --share-processes --allow-userns: locked
// mounts), also from a nested session started from inside the session;
// a directory beside them stays writable. The unconfined twin: the same
// uid does all of it outside a session. A request naming a relative path
// gets 400, one naming a missing path fails, and a daemon given a bad
// path does not start.
func TestReadOnlyPaths(t *testing.T) {
	base := t.TempDir() // root's: only the fixture's directories below it are the user's
	_ = os.Chmod(filepath.Dir(base), 0o755)
	_ = os.Chmod(base, 0o755)
	machine, session, beside := filepath.Join(base, "p", "machine"), filepath.Join(base, "p", "session"), filepath.Join(base, "p", "beside")
	roDir(t, machine)
	roDir(t, session)
	if err := os.Mkdir(beside, 0o755); err != nil {
		t.Fatal(err)
	}
	// Their parent is the user's: renaming it away would be a way round.
	for _, p := range []string{filepath.Dir(machine), beside} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixtureFlags(t, []string{"--read-only", machine}, "203.0.113.10")
	script := filepath.Join(f.dir, "try.sh")
	f.writeFile(t, script, []byte(roTryScript))
	run := func(t *testing.T, flags ...string) string {
		args := append([]string{"run", "--read-only", session}, flags...)
		out, stderr, code := f.sluice(t, 65534, 65534, append(args, "--", "env", "BESIDE="+beside, "sh", script, machine, session)...)
		if code != 0 {
			t.Fatalf("the session failed (exit %d): %s", code, stderr)
		}
		return out
	}
	t.Run("session", func(t *testing.T) { wantRefused(t, "session", run(t), machine, session) })
	t.Run("share-processes-allow-userns", func(t *testing.T) {
		wantRefused(t, "--share-processes --allow-userns", run(t, "--share-processes", "--allow-userns"), machine, session)
	})
	t.Run("nested", func(t *testing.T) {
		// The nested session names no read-only path: the daemon's is
		// applied again, its parent's comes with the parent's mounts.
		nested := filepath.Join(f.dir, "nested.sh")
		f.writeFile(t, nested, []byte(fmt.Sprintf("exec %s --socket %s run -- env BESIDE=%s sh %s %s %s\n", sluiceBin, f.sock, beside, script, machine, session)))
		out, stderr, code := f.sluice(t, 65534, 65534, "run", "--read-only", session, "--", "sh", nested)
		if code != 0 {
			t.Fatalf("the nested session failed (exit %d): %s", code, stderr)
		}
		wantRefused(t, "nested session", out, machine, session)
	})
	t.Run("bad-requests", func(t *testing.T) {
		for _, p := range []string{"relative/dir", machine + "/../p", machine + "/"} {
			body := fmt.Sprintf(`{"argv": ["/bin/true"], "user": "65534", "read_only_paths": [%q]}`, p)
			if code, msg := f.api(t, "POST", "/v1/sessions", []byte(body)); code != 400 || !strings.Contains(msg, "read_only_paths") {
				t.Errorf("read_only_paths [%q]: %d %s, want 400 naming read_only_paths", p, code, msg)
			}
		}
		missing := filepath.Join(base, "p", "none")
		if _, stderr, code := f.sluice(t, 65534, 65534, "run", "--read-only", missing, "--", "true"); code == 0 || !strings.Contains(stderr, "does not exist") {
			t.Errorf("a missing read-only path: exit %d %s, want a refusal saying it does not exist", code, stderr)
		}
		if _, stderr, code := f.sluice(t, 65534, 65534, "run", "--read-only", "rel", "--", "true"); code == 0 || !strings.Contains(stderr, "not an absolute path") {
			t.Errorf("sluice run --read-only rel: exit %d %s", code, stderr)
		}
		c := exec.Command(sluiceBin, "daemon", "--socket", filepath.Join(f.dir, "bad.sock"), "--state-dir", "/run/"+f.instance+"-bad", "--read-only", "relative")
		c.Env = append(os.Environ(), "SLUICE_INSTANCE="+f.instance+"-bad")
		if out, err := c.CombinedOutput(); err == nil || !strings.Contains(string(out), "not an absolute path") {
			t.Errorf("a daemon with --read-only relative: %v %s, want it refused at the start", err, out)
		}
		if _, err := os.Lstat(filepath.Join(f.dir, "bad.sock")); err == nil {
			t.Error("the refused daemon made its socket")
		}
	})
	// The twin, last (it changes the trees): the same uid outside any
	// session does everything the sessions could not.
	t.Run("unconfined-twin", func(t *testing.T) {
		c := exec.Command("env", "BESIDE="+beside, "sh", script, machine, session)
		c.SysProcAttr = nobody
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		out := string(b)
		for _, d := range []string{machine, session} {
			for _, op := range roOps {
				if !strings.Contains(out, op+" "+d+" ok\n") {
					t.Errorf("outside a session, %s below %s failed, so the test proves nothing:\n%s", op, d, out)
				}
			}
		}
	})
}
