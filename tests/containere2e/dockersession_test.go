// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
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
	// Its close too, before the test moves the client's link into a
	// container: a FIN of the world's still in flight then reaches the
	// container's namespace, whose kernel answers it with a reset from
	// the client's address, which would count against the confined run.
	if !w.WaitQuiet(world.To(world.DeniedV4), 500*time.Millisecond, 10*time.Second) {
		t.Fatal("the twin's connection to the denied host did not go quiet within 10 s")
	}
	return time.Now()
}

// dockerRun is a running `sluice run --user 65534:65534 --docker` of a
// test's script in its workspace.
type dockerRun struct {
	t    *testing.T
	ws   string
	out  *bytes.Buffer
	cmd  *exec.Cmd
	done chan error
}

// startDockerRun starts `sluice run --user 65534:65534 --docker
// --docker-host host ARGS -- sh -c script` in ws, in the test's instance,
// with WS and IMG and env in its environment.
func startDockerRun(ctx context.Context, t *testing.T, bin, instance, host, ws string, args []string, script string, env ...string) *dockerRun {
	t.Helper()
	argv := append([]string{"run", "--user", "65534:65534", "--docker", "--docker-host", host}, args...)
	cmd := exec.CommandContext(ctx, bin, append(argv, "--", "sh", "-c", script)...)
	cmd.Dir = ws
	cmd.Env = append(append(os.Environ(), "SLUICE_INSTANCE="+instance, "WS="+ws, "IMG="+dockertest.BaseImage), env...)
	r := &dockerRun{t: t, ws: ws, out: &bytes.Buffer{}, cmd: cmd, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- cmd.Wait() }()
	return r
}

// waitFile waits up to d for the script to make the workspace file name;
// the test fails, with the outputs named by show, if the session ends or
// the time runs out first (the session is then sent SIGABRT, whose
// goroutine dump shows what it waits for).
func (r *dockerRun) waitFile(name string, d time.Duration, show ...string) {
	r.t.Helper()
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(filepath.Join(r.ws, name)); err == nil {
			return
		}
		select {
		case err := <-r.done:
			r.done <- err
			r.t.Fatalf("the session ended before %s: %v\n%s\n%s", name, err, r.out.String(), r.reads(show))
		default:
		}
		if time.Now().After(deadline) {
			_ = r.cmd.Process.Signal(syscall.SIGABRT)
			time.Sleep(2 * time.Second)
			r.t.Fatalf("no %s within %v:\n%s\n%s", name, d, r.out.String(), r.reads(show))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// touch makes the workspace file name, for the script waiting for it.
func (r *dockerRun) touch(name string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.ws, name), nil, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// end waits up to d for the session to end and returns when it did; the
// test fails if sluice run failed or the script did not get to its done
// file.
func (r *dockerRun) end(d time.Duration) time.Time {
	r.t.Helper()
	select {
	case err := <-r.done:
		r.t.Logf("sluice run: %v\n%s", err, r.out.String())
		if err != nil {
			r.t.Errorf("sluice run --docker: %v", err)
		}
	case <-time.After(d):
		r.t.Fatalf("the session did not end within %v:\n%s", d, r.out.String())
	}
	ended := time.Now()
	if _, err := os.Stat(filepath.Join(r.ws, "done")); err != nil {
		r.t.Fatalf("the script did not finish:\n%s", r.out.String())
	}
	return ended
}

// read is the script's output file name.out.
func (r *dockerRun) read(name string) string {
	b, _ := os.ReadFile(filepath.Join(r.ws, name+".out"))
	return string(b)
}

func (r *dockerRun) reads(names []string) string {
	var s strings.Builder
	for _, n := range names {
		s.WriteString(r.read(n))
	}
	return s.String()
}
