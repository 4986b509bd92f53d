// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
	"github.com/sluice-dev/sluice/tests/world"
)

// TestRunInContainerThroughHostDaemon runs `sluice run` inside an
// unprivileged container (no extra capabilities, --network none, then the
// client's end of the world's link as its only route) that reaches the
// host's daemon through a bind-mounted socket, with a static sluice built
// on the host. The daemon lets uid 1000 in (--container-caller): its
// command runs in the container's namespaces (its hostname, its /etc, its
// network, IPC and PID namespaces), reaches an allowed world host by name
// through the session's resolver listening in the container's network
// namespace, and a denied host gets EPERM and the explained line while the
// world records nothing. uid 1001 in the same container is refused with
// 403, as is every container caller of a daemon without the rule.
func TestRunInContainerThroughHostDaemon(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	w := world.New(t)
	w.ServeDNS(t, dnsAddr, world.Zone(map[string][]string{"allowed.test.": {"A " + world.AllowedV4.String()}}))
	allowedPort := w.ListenTCP(t, world.AllowedV4)
	deniedPort := w.ListenTCP(t, world.DeniedV4)
	bin, instance := staticSluice(t)
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	allow := filepath.Join(dir, "network_allowlist.json")
	if err := os.WriteFile(allow, []byte(`{"allowed_hosts": ["allowed.test"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(dir, "audit.jsonl")
	sock := filepath.Join(dir, "sluice.sock")
	// The daemon lives in the world namespace, where the test's DNS server
	// is its upstream; the container is another network namespace.
	d := &daemonProc{w: w, bin: bin, instance: instance, args: []string{"daemon", "--socket", sock,
		"--allowlist", allow, "--state-dir", "/run/" + instance, "--audit-log", audit,
		"--dns-upstream", dnsAddr.String(), "--group", "65534", "--container-caller", "uid:1000"}}
	d.run(t)
	waitAudit(t, audit, "daemon_started", 1)

	probe := world.BuildProbe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := e.Docker(ctx, "run", "-d", "--name", "agent", "--network", "none", "--hostname", "agentbox",
		"-u", "1000:65534", "-v", sock+":/run/sluice/sluice.sock", "-v", bin+":/usr/local/bin/sluice:ro",
		"-v", probe+":/usr/local/bin/probe:ro", dockertest.BaseImage, "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	pid := containerPid(t, e, "agent")
	moveClientLink(t, w, pid)

	// run is `docker exec [-u user] agent sluice run ARGS`: its stdout,
	// stderr and exit code.
	run := func(user string, args ...string) (string, string, int) {
		t.Helper()
		c := exec.CommandContext(ctx, "docker", append([]string{"exec", "-u", user, "agent", "sluice", "run"}, args...)...)
		c.Env = append(os.Environ(), "DOCKER_HOST="+e.Host)
		var out, errb strings.Builder
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("docker exec sluice run %v: %v", args, err)
		}
		t.Logf("sluice run %v as %s -> %d\nstdout: %s\nstderr: %s", args, user, code, out.String(), errb.String())
		return out.String(), errb.String(), code
	}
	probeRun := func(args ...string) (world.ProbeResult, string) {
		t.Helper()
		out, errs, _ := run("1000:65534", append([]string{"--allow", "allowed.test", "--", "probe"}, args...)...)
		r, err := world.ParseProbeResult([]byte(out))
		if err != nil {
			t.Fatalf("probe %v: %v %q %q", args, err, out, errs)
		}
		return r, errs
	}

	if r, _ := probeRun("resolve-tcp", "allowed.test", fmt.Sprint(allowedPort)); !r.OK {
		t.Errorf("an allowed host by name: %s", r)
	}
	r, stderr := probeRun("tcp", world.DeniedV4.String(), fmt.Sprint(deniedPort))
	if r.OK || r.Errno != "EPERM" {
		t.Errorf("a denied host: %s, want EPERM", r)
	}
	if !strings.Contains(stderr, "denied probe[") || !strings.Contains(stderr, world.DeniedV4.String()+":"+fmt.Sprint(deniedPort)+"/tcp: not in the allowlist") {
		t.Errorf("no explained line for the denied host in stderr: %q", stderr)
	}
	w.AssertNothingArrived(t, world.To(world.DeniedV4), 200*time.Millisecond)

	// Where the command ran: the container's hostname, /etc, and
	// namespaces, as the host sees the container's first process.
	out, _, code := run("1000:65534", "--", "sh", "-c",
		"cat /proc/sys/kernel/hostname /etc/hostname; readlink /proc/self/ns/net /proc/self/ns/uts /proc/self/ns/ipc /proc/self/ns/pid /proc/self/ns/mnt; echo $$")
	if code != 0 {
		t.Fatalf("sluice run sh: exit %d", code)
	}
	lines := strings.Fields(out)
	if len(lines) != 8 {
		t.Fatalf("sluice run sh printed %q, want 8 lines", out)
	}
	if lines[0] != "agentbox" || lines[1] != "agentbox" {
		t.Errorf("hostname %q and /etc/hostname %q, want the container's agentbox", lines[0], lines[1])
	}
	for i, ns := range []string{"net", "uts", "ipc", "pid"} {
		want, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		if err != nil {
			t.Fatal(err)
		}
		if lines[2+i] != want {
			t.Errorf("the command's %s namespace is %s, want the container's %s", ns, lines[2+i], want)
		}
	}
	hostMnt, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if lines[6] == hostMnt {
		t.Errorf("the command shares the container's mount namespace %s: the session's own (hidden paths, /proc) was not built", hostMnt)
	}
	var inner int
	if _, err := fmt.Sscan(lines[7], &inner); err != nil || inner <= 1 || inner > 1000 {
		t.Errorf("the command's pid as it sees itself is %q: not a pid of the container's namespace", lines[7])
	}

	waitAuditMatch(t, audit, "a session_started line saying the session runs in its caller's namespaces", func(e map[string]any) bool {
		return e["type"] == "session_started" && strings.Contains(fmt.Sprint(e["message"]), "in the namespaces of its caller")
	})

	// Another uid in the same container: not in --container-caller. The
	// daemon answers 403, which it alone records as session_refused.
	if _, stderr, code := run("1001:65534", "--allow", "allowed.test", "--", "probe", "tcp", world.DeniedV4.String(), fmt.Sprint(deniedPort)); code == 0 ||
		!strings.Contains(stderr, "another network namespace") || !strings.Contains(stderr, "--container-caller") {
		t.Errorf("uid 1001 (not permitted) got exit %d, stderr %q; want a refusal naming the other network namespace and the rule", code, stderr)
	}
	w.AssertNothingArrived(t, world.To(world.DeniedV4), 100*time.Millisecond)
	waitAuditMatch(t, audit, "a session_refused line (a 403) for uid 1001", func(e map[string]any) bool {
		return e["type"] == "session_refused" && e["actor_uid"] == float64(1001) && strings.Contains(fmt.Sprint(e["reason"]), "another network namespace")
	})
}

// staticSluice builds sluice without cgo, so that the one binary runs
// both as the host's daemon and inside a Debian container, with an
// instance of its own.
func staticSluice(t *testing.T) (bin, instance string) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	instance = "sluice-ctns-" + hex.EncodeToString(rnd[:])
	bin = filepath.Join(t.TempDir(), "sluice")
	c := exec.Command("go", "build", "-o", bin, "github.com/sluice-dev/sluice/cmd/sluice")
	c.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("build sluice: %v\n%s", err, out)
	}
	_ = os.Chmod(filepath.Dir(bin), 0o755)
	return bin, instance
}
