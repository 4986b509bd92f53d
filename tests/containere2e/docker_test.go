// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
	"github.com/sluice-dev/sluice/tests/world"
)

// dockerScript is what the agent does in its `sluice run --docker`
// session, as an unprivileged user with the host's docker client: run a
// container of its own, wait for the test to link it to the world, probe
// an allowed and a denied world host from it, then try what the broker
// refuses. Each attempt's output and exit status go to a file of the
// workspace. The container is left running: the session's end removes it.
const dockerScript = `set -u
cd "$WS"
export HOME="$WS" DOCKER_CONFIG="$WS/.docker"
timeout 60 docker run -d --name agent --network none -v "$WS/probe:/usr/local/bin/probe:ro" "$IMG" sleep 600 > agent.out 2>&1 || { cat agent.out; exit 3; }
touch started
i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
docker exec agent probe tcp "$ALLOWED" "$APORT" > allowed.json 2> allowed.err
docker exec agent probe tcp "$DENIED" "$DPORT" > denied.json 2> denied.err
r() { n=$1; shift; docker "$@" > "$n.out" 2>&1; echo "exit=$?" >> "$n.out"; }
r attached run --rm --network none "$IMG" echo hello-from-the-container
r privileged run --rm --privileged "$IMG" true
r hostnet run --rm --network host "$IMG" true
r rootfs run --rm -v /:/host "$IMG" true
r pidhost run --rm --pid host "$IMG" true
r sock run --rm -v "$ENGINE:/var/run/docker.sock" "$IMG" true
r rofs run --rm -v "$WS:/w" "$IMG" true
r capadd run --rm --cap-add SYS_ADMIN "$IMG" true
r seccomp run --rm --security-opt seccomp=unconfined "$IMG" true
r otherexec exec other true
r otherrm rm -f other
r pull pull registry.denied.test/tools:1
r prune container prune -f
r ps ps -a --format '{{.Names}}'
# Streams left open at the end: the session's end cuts them.
docker logs -f agent > follow.out 2>&1 &
docker wait agent > wait.out 2>&1 &
docker attach agent > attach.out 2>&1 < /dev/null &
sleep 0.5
touch done
`

// TestDockerInSession runs the host's docker client inside a `sluice run
// --docker` session against a private engine: a container it runs is
// confined by the session's policy (an allowed world host answers, a
// denied one gets EPERM and the world records nothing, while the same
// connection from outside sluice arrives); privileged containers, host
// namespaces, a bind of / or of the engine's socket, an added capability,
// seccomp turned off, another's container, an unlisted registry and an
// unjudged endpoint are refused with their messages; the session's end
// removes its container and leaves the other alone.
func TestDockerInSession(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	w := world.New(t)
	allowedPort := w.ListenTCP(t, world.AllowedV4)
	deniedPort := w.ListenTCP(t, world.DeniedV4)
	bin, instance := embeddedSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// A container the session did not create.
	if _, err := e.Docker(ctx, "run", "-d", "--name", "other", "--network", "none", dockertest.BaseImage, "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	// The unconfined twin: the denied host answers from the client's
	// namespace without sluice.
	mark := twinReachesDenied(t, w, deniedPort)

	ws := sessionWorkspace(t, bin)
	// A read-only path in the workspace: binding the workspace would open
	// it in a container.
	if err := os.Mkdir(filepath.Join(ws, "ro"), 0o755); err != nil {
		t.Fatal(err)
	}
	engine := strings.TrimPrefix(e.Host, "unix://")
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	run := startDockerRun(ctx, t, bin, instance, e.Host, ws, []string{"--audit-log", auditLog, "--read-only", filepath.Join(ws, "ro"),
		"--allow", world.AllowedV4.String() + "/32"}, dockerScript, "ENGINE="+engine,
		"ALLOWED="+world.AllowedV4.String(), "APORT="+fmt.Sprint(allowedPort),
		"DENIED="+world.DeniedV4.String(), "DPORT="+fmt.Sprint(deniedPort))
	out := run.out
	run.waitFile("started", 40*time.Second, "agent")
	id, err := e.Docker(ctx, "inspect", "-f", "{{.Id}} {{index .Config.Labels \"sluice.session\"}} {{.HostConfig.CgroupParent}}", "agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agent: %s", id)
	if f := strings.Fields(id); len(f) != 3 || f[1] == "" || f[2] != "/"+instance {
		t.Errorf("the agent's container: id, session label, cgroup parent = %q, want a label and /%s", id, instance)
	}
	moveClientLink(t, w, containerPid(t, e, "agent"))
	run.touch("go")
	ended := run.end(3 * time.Minute)
	st, err := os.Stat(filepath.Join(ws, "done"))
	if err != nil {
		t.Fatal(err)
	}
	// From the script's end to the session's, with a followed log, a
	// wait and an attach open and the container to remove.
	t.Logf("the session ended %v after its script", ended.Sub(st.ModTime()).Round(time.Millisecond))

	var refusals []string
	for _, ev := range world.ReadAuditLog(t, auditLog) {
		if ev["type"] == "docker_refused" {
			refusals = append(refusals, fmt.Sprint(ev["message"]))
		}
	}
	if !strings.Contains(out.String(), "sluice: docker: refused container create: --privileged") {
		t.Errorf("the session's terminal has no line for the refused --privileged")
	}
	if r := readProbe(t, filepath.Join(ws, "allowed.json")); !r.OK {
		b, _ := os.ReadFile(filepath.Join(ws, "allowed.err"))
		t.Errorf("the session's container to an allowed host: %s %s", r, b)
	}
	if r := readProbe(t, filepath.Join(ws, "denied.json")); r.OK || r.Errno != "EPERM" {
		t.Errorf("the session's container to a denied host: %s, want EPERM", r)
	}
	w.AssertNothingArrived(t, world.All(world.To(world.DeniedV4), world.Since(mark)), 200*time.Millisecond)

	for name, want := range map[string]string{
		"privileged": "--privileged",
		"hostnet":    "--network host",
		"rootfs":     "-v /:/host: only paths within the session's workspace",
		"pidhost":    "--pid host",
		"sock":       "the Docker socket",
		"capadd":     "--cap-add CAP_SYS_ADMIN",
		"rofs":       "which the session's sandbox hides or makes read-only",
		"seccomp":    "--security-opt seccomp=unconfined",
		"otherexec":  "other is not a container of this session",
		"otherrm":    "other is not a container of this session",
		"pull":       "the registry registry.denied.test is not in the session's allowlist",
		"prune":      "not an endpoint sluice judges",
	} {
		b, _ := os.ReadFile(filepath.Join(ws, name+".out"))
		s := string(b)
		if !strings.Contains(s, "sluice: refused") || !strings.Contains(s, want) || strings.Contains(s, "exit=0") {
			t.Errorf("%s: %q, want a refusal saying %q", name, s, want)
		}
		if !slices.ContainsFunc(refusals, func(m string) bool { return strings.Contains(m, want) }) {
			t.Errorf("%s: no docker_refused event saying %q in the audit log", name, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "attached.out")); string(b) != "hello-from-the-container\nexit=0\n" {
		t.Errorf("docker run --rm, attached, in the session: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "ps.out")); strings.TrimSpace(string(b)) != "agent\nexit=0" {
		t.Errorf("docker ps in the session: %q, want its own container only", b)
	}

	// The session's end removed its container, and only its own.
	left, err := e.Docker(ctx, "ps", "-a", "--format", "{{.Names}}")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(left) != "other" {
		t.Errorf("containers after the session: %q, want other alone", left)
	}
	root := cgroupRoot(t, instance)
	if f := strings.Fields(id); len(f) > 0 {
		if _, err := os.Stat(filepath.Join(root, f[0])); !os.IsNotExist(err) {
			t.Errorf("the container's cgroup is left behind: %v", err)
		}
	}
}
