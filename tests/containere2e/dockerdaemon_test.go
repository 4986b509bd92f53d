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

// engineGroup is the group the test gives the engine's socket, as a
// machine's docker group: the session's user is in it, the refused one
// is not.
const engineGroup = 64000

// daemonDockerScript is what the agent does in a `sluice run --docker`
// session the daemon serves, as an unprivileged user: run a container of
// its own, wait for the test to link it to the world, probe an allowed
// and a denied world host from it; then, once the test restarted the
// daemon, list its containers, probe again and try a refused create.
const daemonDockerScript = `set -u
cd "$WS"
export HOME="$WS" DOCKER_CONFIG="$WS/.docker"
echo "$DOCKER_HOST" > host.out
timeout 60 docker run -d --name agent --network none -v "$WS/probe:/usr/local/bin/probe:ro" "$IMG" sleep 600 > agent.out 2>&1 || { cat agent.out; exit 3; }
touch started
w() { i=0; while [ ! -e "$1" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; }
w go1
docker exec agent probe tcp "$ALLOWED" "$APORT" > allowed1.json 2> allowed1.err
docker exec agent probe tcp "$DENIED" "$DPORT" > denied1.json 2> denied1.err
touch probed1
w go2
docker ps --format '{{.Names}}' > ps.out 2>&1
docker exec agent probe tcp "$ALLOWED" "$APORT" > allowed2.json 2> allowed2.err
docker exec agent probe tcp "$DENIED" "$DPORT" > denied2.json 2> denied2.err
docker run --rm --privileged "$IMG" true > privileged.out 2>&1; echo "exit=$?" >> privileged.out
touch done
`

// TestDockerSessionThroughTheDaemon: an unprivileged user who may use
// the engine (its socket's group) gets a Docker socket in a session the
// daemon serves. The container it runs is the session's, not the
// daemon's container watcher's: the machine allowlist allows the denied
// host, the session's does not, and the denied host gets EPERM and
// records nothing while the unconfined twin arrives. Its refused create
// is a line on the user's terminal. The session's end removes the
// container. A user of the session group outside the engine's group is
// refused a Docker socket, as are requests naming a socket the user may
// not reach.
func TestDockerSessionThroughTheDaemon(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	w := world.New(t)
	allowedPort := w.ListenTCP(t, world.AllowedV4)
	deniedPort := w.ListenTCP(t, world.DeniedV4)
	bin, instance := sluiceBinary(t)
	engine := strings.TrimPrefix(e.Host, "unix://")
	// The engine's socket as a machine's: root:docker 0660, below
	// directories everyone may search.
	if err := os.Chown(engine, 0, engineGroup); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(engine, 0o660); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(engine), 0o711); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	allow := filepath.Join(dir, "network_allowlist.json")
	// The machine allows both hosts: a container the watcher took would
	// reach the denied one.
	machine := fmt.Sprintf(`{"allowed_hosts": ["%s/32", "%s/32"]}`, world.AllowedV4, world.DeniedV4)
	if err := os.WriteFile(allow, []byte(machine), 0o644); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(dir, "audit.jsonl")
	sock := filepath.Join(dir, "sluice.sock")
	// The daemon in the host's network namespace, where its clients are.
	d := &daemonProc{bin: bin, instance: instance, args: []string{"daemon", "--socket", sock,
		"--allowlist", allow, "--state-dir", "/run/" + instance, "--audit-log", auditLog, "--group", "65534"}}
	d.run(t)
	waitAudit(t, auditLog, "daemon_started", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mark := twinReachesDenied(t, w, deniedPort)

	ws := sessionWorkspace(t, bin)
	// sluiceAs runs `sluice run --docker ARGS -- sh -c script` through the
	// daemon as uid:gid with groups, in the workspace.
	sluiceAs := func(uid, gid uint32, groups []uint32, args []string, script string) *exec.Cmd {
		argv := append([]string{"run", "--socket", sock, "--docker", "--docker-host", e.Host}, args...)
		c := exec.CommandContext(ctx, bin, append(argv, "--", "sh", "-c", script)...)
		c.Dir = ws
		c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + ws, "WS=" + ws, "IMG=" + dockertest.BaseImage,
			"ALLOWED=" + world.AllowedV4.String(), "APORT=" + fmt.Sprint(allowedPort),
			"DENIED=" + world.DeniedV4.String(), "DPORT=" + fmt.Sprint(deniedPort)}
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
		c.WaitDelay = 10 * time.Second
		return c
	}

	// Refused: a user of the session group outside the engine's.
	out, err := sluiceAs(65533, 65534, nil, nil, "touch refused-ran").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "for users who may use the engine themselves") {
		t.Errorf("a user without engine access: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "refused-ran")); err == nil {
		t.Error("the refused user's command ran")
	}

	run := sluiceAs(65534, 65534, []uint32{engineGroup}, []string{"--allow", world.AllowedV4.String() + "/32"}, daemonDockerScript)
	r := &dockerRun{t: t, ws: ws, out: &bytes.Buffer{}, cmd: run, done: make(chan error, 1)}
	run.Stdout, run.Stderr = r.out, r.out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- run.Wait() }()
	r.waitFile("started", 60*time.Second, "agent", "host")
	labels, err := e.Docker(ctx, "inspect", "-f", `{{index .Config.Labels "sluice.session"}} {{.HostConfig.CgroupParent}}`, "agent")
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(labels); len(f) != 2 || f[1] != "/"+instance {
		t.Errorf("the agent's container: session label, cgroup parent = %q, want a label and /%s", labels, instance)
	}
	moveClientLink(t, w, containerPid(t, e, "agent"))
	r.touch("go1")
	r.waitFile("probed1", 60*time.Second)
	// A kill -9 of the daemon and a new one: the session's supervisor
	// kept its Docker socket, the new daemon serves it again, takes back
	// the session's container and attaches it again.
	d.kill()
	d.start(t)
	waitAudit(t, auditLog, "session_adopted", 1)
	r.touch("go2")
	r.end(3 * time.Minute)

	if h := strings.TrimSpace(r.read("host")); !strings.HasPrefix(h, "unix://") || h == e.Host {
		t.Errorf("the session's DOCKER_HOST is %q, want the broker's socket", h)
	}
	for _, n := range []string{"1", "2 (after the daemon's restart)"} {
		if p := readProbe(t, filepath.Join(ws, "allowed"+n[:1]+".json")); !p.OK {
			b, _ := os.ReadFile(filepath.Join(ws, "allowed"+n[:1]+".err"))
			t.Errorf("the session's container to an allowed host, probe %s: %s %s", n, p, b)
		}
		if p := readProbe(t, filepath.Join(ws, "denied"+n[:1]+".json")); p.OK || p.Errno != "EPERM" {
			t.Errorf("the session's container to a host the machine allows and the session does not, probe %s: %s, want EPERM", n, p)
		}
	}
	w.AssertNothingArrived(t, world.All(world.To(world.DeniedV4), world.Since(mark)), 200*time.Millisecond)
	if got := strings.TrimSpace(r.read("ps")); got != "agent" {
		t.Errorf("docker ps after the daemon's restart: %q, want the session's container", got)
	}
	// Both denials are the session's lines: after the restart too, the
	// container is the session's child again.
	if n := strings.Count(r.out.String(), "denied probe["); n != 2 {
		t.Errorf("%d denial lines for the container's probes on the user's terminal, want 2:\n%s", n, r.out)
	}
	if p := r.read("privileged"); !strings.Contains(p, "--privileged") || strings.Contains(p, "exit=0") {
		t.Errorf("docker run --privileged: %s", p)
	}
	if !strings.Contains(r.out.String(), "sluice: docker: refused container create: --privileged") {
		t.Errorf("the user's terminal has no line for the refused --privileged:\n%s", r.out)
	}
	waitAuditMatch(t, auditLog, "the session's docker_refused", func(ev map[string]any) bool {
		return ev["type"] == "docker_refused" && strings.Contains(fmt.Sprint(ev["message"]), "--privileged")
	})
	if ps, err := e.Docker(ctx, "ps", "-a", "--filter", "name=agent", "--format", "{{.Names}}"); err != nil || strings.TrimSpace(ps) != "" {
		t.Errorf("after the session's end: containers %q (%v), want none", ps, err)
	}
}
