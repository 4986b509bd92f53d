// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
	"github.com/sluice-dev/sluice/tests/world"
)

// testDaemonContainerRestart runs the image's daemon with the Dockerfile's
// unprivileged recipe (capabilities, no --privileged) and --network none,
// starts a session through `docker exec`, restarts the container while the
// session runs, and checks that the session survived (it was spawned out
// of the container's v1 cgroups), stayed confined (a connect to a denied
// address is EPERM), was re-adopted, and ended with its exit status.
func testDaemonContainerRestart(t *testing.T, e *dockertest.Engine) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	instance := "sluice-ctr-" + hex.EncodeToString(rnd[:])
	state := t.TempDir()
	markers := t.TempDir()
	_ = os.Chmod(markers, 0o777)
	probe := world.BuildProbe(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = e.Docker(ctx, "rm", "-f", "sluice-daemon")
		// The container's own cleanup command, as the Dockerfile says.
		if out, err := e.Docker(ctx, append(daemonRunFlags(instance, state, probe, markers, "--rm"), "--entrypoint", "sluice", dockertest.SluiceImage, "cleanup")...); err != nil {
			t.Errorf("sluice cleanup in a container: %v\n%s", err, out)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := e.Docker(ctx, append(daemonRunFlags(instance, state, probe, markers, "-d", "--name", "sluice-daemon"),
		dockertest.SluiceImage, "--group", "65534", "--audit-log", "/run/sluice/audit.jsonl")...); err != nil {
		t.Fatalf("docker run the daemon: %v\n%s", err, out)
	}
	audit := filepath.Join(state, "audit.jsonl")
	waitAudit(t, audit, "daemon_started", 1)

	script := `touch /markers/started; while [ ! -e /markers/go ]; do sleep 0.05; done; ` +
		`probe tcp 203.0.113.20 80 > /markers/probe.out; exit 7`
	if out, err := e.Docker(ctx, "exec", "-d", "sluice-daemon", "sluice", "run", "--user", "65534:65534", "--", "sh", "-c", script); err != nil {
		t.Fatalf("docker exec sluice run: %v\n%s", err, out)
	}
	waitPath(t, filepath.Join(markers, "started"))
	if out, err := e.Docker(ctx, "restart", "sluice-daemon"); err != nil {
		t.Fatalf("docker restart: %v\n%s", err, out)
	}
	waitAudit(t, audit, "session_adopted", 1)
	if err := os.WriteFile(filepath.Join(markers, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ended := waitAudit(t, audit, "session_ended", 1)
	if ended["exit"] != float64(7) {
		t.Errorf("session_ended after the container restart: %v, want exit 7 (the session outlived the container)", ended)
	}
	b, _ := os.ReadFile(filepath.Join(markers, "probe.out"))
	r, err := world.ParseProbeResult(b)
	if err != nil || r.OK || r.Errno != "EPERM" {
		t.Errorf("a denied connect from the re-adopted session: %s (%v), want EPERM", b, err)
	}
	waitAudit(t, audit, "egress_denied", 1)
}

// daemonRunFlags is `docker run` as the Dockerfile documents it without
// --privileged, with --network none and this test's paths and instance.
func daemonRunFlags(instance, state, probe, markers string, extra ...string) []string {
	return append(append([]string{"run"}, extra...),
		"--network", "none", "--cgroupns", "host", "--pid", "host",
		"--cap-add", "SYS_ADMIN", "--cap-add", "NET_ADMIN", "--cap-add", "SYS_PTRACE", "--cap-add", "DAC_READ_SEARCH",
		"-v", "/sys/fs/bpf:/sys/fs/bpf", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
		"-v", state+":/run/sluice", "-v", probe+":/usr/local/bin/probe:ro", "-v", markers+":/markers",
		"-e", "SLUICE_INSTANCE="+instance)
}

// waitAudit waits (bounded) for the n-th line of type typ in the audit log
// and returns it.
func waitAudit(t *testing.T, path, typ string, n int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			seen := 0
			for _, e := range world.ReadAuditLog(t, path) {
				if e["type"] == typ {
					if seen++; seen == n {
						return e
					}
				}
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(path)
			t.Fatalf("no %s line in the audit log within 60 s:\n%s", typ, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitPath(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 60 s", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
