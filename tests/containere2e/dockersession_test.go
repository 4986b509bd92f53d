// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// The `sluice run --docker` tests' common ground: sluice run embedded (no
// daemon) in an instance of the test's own, a workspace the session's
// unprivileged user can work in, and the unconfined twin's connection.

// embeddedSluice is the sluice binary and an instance of the test's own
// for tests that run `sluice run` themselves; at the end the instance's
// datapath is removed, and so are the cgroup parents the engine left in
// every cgroup v1 hierarchy.
func embeddedSluice(t *testing.T) (bin, instance string) {
	t.Helper()
	bin, instance = sluiceBinary(t)
	t.Cleanup(func() {
		c := exec.Command(bin, "cleanup", "--state-dir", "/run/"+instance)
		c.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance)
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("sluice cleanup: %v\n%s", err, out)
		}
		for _, dir := range v1Parents(t, instance) {
			if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
				t.Errorf("remove %s: %v", dir, err)
			}
		}
	})
	return bin, instance
}

// sessionWorkspace is a directory the session's user works in, holding
// the probe: the test's directories are 0700, and that user runs
// sluice's shim (the binary) and works in the workspace.
func sessionWorkspace(t *testing.T, bin string) string {
	t.Helper()
	ws := t.TempDir()
	for _, d := range []string{filepath.Dir(ws), filepath.Dir(bin)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	probe, err := os.ReadFile(world.BuildProbe(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "probe"), probe, 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

// twinReachesDenied is the unconfined twin: from the client's namespace,
// without sluice, the denied host answers and the world records it. It
// returns the time after which the world must record nothing more.
func twinReachesDenied(t *testing.T, w *world.World, deniedPort uint16) time.Time {
	t.Helper()
	if r := w.RunProbe(t, nil, "tcp", world.DeniedV4.String(), fmt.Sprint(deniedPort)); !r.OK {
		t.Fatalf("the twin without sluice could not reach the denied host: %s", r)
	}
	if !w.WaitArrival(world.To(world.DeniedV4), 5*time.Second) {
		t.Fatal("the world recorded nothing of the twin's connection")
	}
	return time.Now()
}
