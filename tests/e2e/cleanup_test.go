// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// noCgroup2 is a shell prelude for `unshare -m`: in the new mount
// namespace no cgroup2 file system is mounted, as on a machine without
// one (the demo's "cannot start" case).
const noCgroup2 = `for m in $(findmnt -rn -t cgroup2 -o TARGET); do umount -l "$m" || exit 97; done; `

// inOwnMounts runs script with sh in a private mount namespace, with
// SLUICE_INSTANCE=inst and $SLUICE the binary, and returns its output and
// exit status.
func inOwnMounts(t *testing.T, inst, script string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "unshare", append([]string{"-m", "--propagation", "private", "--", "sh", "-c", script, "sh"}, args...)...)
	c.Env = append(os.Environ(), "SLUICE_INSTANCE="+inst, "SLUICE="+sluiceBin)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("unshare: %v", err)
	}
	t.Logf("%s\n-> exit %d\n%s", script, code, out.String())
	if code == 97 {
		t.Fatalf("could not unmount cgroup2 in a private mount namespace")
	}
	return out.String(), code
}

// TestCleanupWithNothingToCleanSucceeds: `sluice cleanup` where sluice
// left nothing, cgroup2 or not, exits 0 and says so; where it left files
// but there is no cgroup2 it removes them; a removal that fails is still
// a failure (non-zero, naming what it could not remove).
func TestCleanupWithNothingToCleanSucceeds(t *testing.T) {
	requireRoot(t)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	inst := "sluice-e2e-clean-" + hex.EncodeToString(rnd[:])
	state := "/run/" + inst
	t.Cleanup(func() { os.RemoveAll(state) })

	for _, script := range []string{`"$SLUICE" cleanup`, noCgroup2 + `"$SLUICE" cleanup`} {
		if out, code := inOwnMounts(t, inst, script); code != 0 || strings.TrimSpace(out) != "sluice: nothing to clean" {
			t.Errorf("%s with nothing to clean: exit %d %q, want 0 and \"nothing to clean\"", script, code, out)
		}
	}

	// State left, no cgroup2: removed.
	if err := os.MkdirAll(filepath.Join(state, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "sessions", "run-1.lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := inOwnMounts(t, inst, noCgroup2+`"$SLUICE" cleanup`); code != 0 || !strings.Contains(out, "removed all") {
		t.Errorf("state left without cgroup2: exit %d %q", code, out)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("%s survived sluice cleanup: %v", state, err)
	}

	// A real failure: the state lies on a read-only file system.
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	out, code := inOwnMounts(t, inst, `mount -t tmpfs none "$1" && mkdir "$1/sessions" && touch "$1/sessions/run-1.lock" && mount -o remount,ro "$1" && "$SLUICE" cleanup`, state)
	if code == 0 || !strings.Contains(out, "read-only file system") {
		t.Errorf("a state directory that cannot be removed: exit %d %q, want a failure naming it", code, out)
	}

	// Not root: a failure too.
	c := exec.Command(sluiceBin, "cleanup")
	c.Env = append(os.Environ(), "SLUICE_INSTANCE="+inst)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if b, err := c.CombinedOutput(); err == nil || !strings.Contains(string(b), "needs root") {
		t.Errorf("cleanup as uid 65534: %v %s", err, b)
	}
}

// TestDemoWithoutCgroup2EndsCleanly: where the demo cannot start (no
// cgroup2), it reports that, and its own cleanup does not add a false
// "'sluice cleanup' failed" (cleanup found nothing to clean).
func TestDemoWithoutCgroup2EndsCleanly(t *testing.T) {
	requireRoot(t)
	_, file, _, _ := runtime.Caller(0)
	demo := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "demo.sh")
	out, code := inOwnMounts(t, "sluice-demo", noCgroup2+`exec "$1" "$SLUICE"`, demo)
	if code == 0 || !strings.Contains(out, "no cgroup2 filesystem is mounted") {
		t.Errorf("the demo without cgroup2: exit %d, want a failure that says why:\n%s", code, out)
	}
	if strings.Contains(out, "cleanup' failed") {
		t.Errorf("the demo reports a failed cleanup where there was nothing to clean:\n%s", out)
	}
}
