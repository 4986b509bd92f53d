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

// buildScript is what the agent does in its `sluice run --docker`
// session: run a container of its own, wait for the test to link it to
// the world, then build images whose RUN steps share that container's
// network (the legacy builder's --network container:<id>) and probe an
// allowed and a denied world host, and try the builds the broker refuses.
// Each attempt's output and exit status go to a file of the workspace.
const buildScript = `set -u
cd "$WS"
export HOME="$WS" DOCKER_CONFIG="$WS/.docker" DOCKER_BUILDKIT=0
timeout 60 docker run -d --name agent --network none "$IMG" sleep 600 > agent.out 2>&1 || { cat agent.out; exit 3; }
touch started
i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
mkdir -p ctx && cp probe ctx/probe
df() { printf '%s\n' "$@" > "ctx/$name.Dockerfile"; }
r() { n=$1; shift; timeout 120 docker "$@" > "$n.out" 2>&1; echo "exit=$?" >> "$n.out"; }
name=allowed df "FROM $IMG" "COPY probe /probe" "RUN /probe tcp $ALLOWED $APORT > /probe.json; cat /probe.json; grep -q '\"ok\":true' /probe.json"
r allowed build --network container:agent -t session-allowed:1 -f ctx/allowed.Dockerfile ctx
name=denied df "FROM $IMG" "COPY probe /probe" "RUN /probe tcp $DENIED $DPORT > /probe.json; cat /probe.json; grep -q '\"ok\":true' /probe.json"
r denied build --network container:agent -t session-denied:1 -f ctx/denied.Dockerfile ctx
name=plain df "FROM $IMG" "RUN echo built-without-a-network > /note"
r plain build --network none -t session-plain:1 -f ctx/plain.Dockerfile ctx
r hostnet build --network host -f ctx/plain.Dockerfile ctx
r othernet build --network container:other -f ctx/plain.Dockerfile ctx
name=addurl df "FROM $IMG" "ADD http://files.denied.test/tool.tar /tool.tar"
r addurl build --network none -f ctx/addurl.Dockerfile ctx
name=fromreg df "FROM registry.denied.test/base:1" "RUN true"
r fromreg build --network none -f ctx/fromreg.Dockerfile ctx
r remote build --network none http://files.denied.test/context.tar
touch done
`

// TestDockerBuildInSession runs `docker build` (the legacy builder) in a
// `sluice run --docker` session against a private engine. A RUN step's
// container is made and started by the engine itself, never seen by the
// broker; it is the session's from its first instruction: a step that
// reaches an allowed world host succeeds, one that tries a denied host
// gets EPERM and the world records nothing, while the same connection
// from outside sluice arrives. Builds the engine would act on outside the
// session are refused with their messages: the host's network, another's
// container's network, an ADD of a URL, a FROM of an unlisted registry (a
// remote context is the client's to fetch, and its proxy refuses the
// host). The session's end leaves no build cgroup behind.
func TestDockerBuildInSession(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	w := world.New(t)
	allowedPort := w.ListenTCP(t, world.AllowedV4)
	deniedPort := w.ListenTCP(t, world.DeniedV4)
	bin, instance := embeddedSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if _, err := e.Docker(ctx, "run", "-d", "--name", "other", "--network", "none", dockertest.BaseImage, "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	mark := twinReachesDenied(t, w, deniedPort)

	ws := sessionWorkspace(t, bin)
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	run := startDockerRun(ctx, t, bin, instance, e.Host, ws, []string{"--audit-log", auditLog, "--allow", world.AllowedV4.String() + "/32"},
		buildScript, "ALLOWED="+world.AllowedV4.String(), "APORT="+fmt.Sprint(allowedPort),
		"DENIED="+world.DeniedV4.String(), "DPORT="+fmt.Sprint(deniedPort))
	run.waitFile("started", 60*time.Second, "agent")
	moveClientLink(t, w, containerPid(t, e, "agent"))
	run.touch("go")
	run.end(6 * time.Minute)
	read, out := run.read, run.out

	if s := read("allowed"); !strings.Contains(s, `"ok":true`) || !strings.HasSuffix(s, "exit=0\n") {
		t.Errorf("a build step to an allowed host:\n%s", s)
	}
	if s := read("denied"); !strings.Contains(s, `"errno":"EPERM"`) || strings.HasSuffix(s, "exit=0\n") {
		t.Errorf("a build step to a denied host:\n%s\nwant EPERM and a failed build", s)
	}
	w.AssertNothingArrived(t, world.All(world.To(world.DeniedV4), world.Since(mark)), 200*time.Millisecond)
	if !strings.Contains(out.String(), world.DeniedV4.String()) {
		t.Errorf("the session's terminal has no line for the build step's denied connection:\n%s", out.String())
	}
	if s := read("plain"); !strings.HasSuffix(s, "exit=0\n") {
		t.Errorf("a build with no network:\n%s", s)
	}

	var refusals []string
	for _, ev := range world.ReadAuditLog(t, auditLog) {
		if ev["type"] == "docker_refused" {
			refusals = append(refusals, fmt.Sprint(ev["message"]))
		}
	}
	for name, want := range map[string]string{
		"hostnet":  "--network host",
		"othernet": "container:other: not a container of this session",
		"addurl":   "files.denied.test",
		"fromreg":  "registry.denied.test",
	} {
		s := read(name)
		if !strings.Contains(s, "sluice: refused") || !strings.Contains(s, want) || strings.HasSuffix(s, "exit=0\n") {
			t.Errorf("%s: %q, want a refusal saying %q", name, s, want)
		}
		if !slices.ContainsFunc(refusals, func(m string) bool { return strings.Contains(m, want) }) {
			t.Errorf("%s: no docker_refused event saying %q in the audit log", name, want)
		}
	}

	// A remote context is fetched by the client itself, in the session:
	// through its proxy, which refuses the host.
	if s := read("remote"); !strings.Contains(s, "files.denied.test is not in the allowlist") || strings.HasSuffix(s, "exit=0\n") {
		t.Errorf("a remote context of a denied host: %q", s)
	}

	// The built image holds what its confined step wrote.
	if got, err := e.Docker(ctx, "run", "--rm", "--network", "none", "session-allowed:1", "cat", "/probe.json"); err != nil || !strings.Contains(got, `"ok":true`) {
		t.Errorf("the built image: %q %v", got, err)
	}
	// Nothing of the builds is left under sluice's root.
	root := cgroupRoot(t, instance)
	ents, _ := os.ReadDir(root)
	for _, d := range ents {
		if d.IsDir() && strings.Contains(d.Name(), ".alias-") {
			t.Errorf("a build's cgroup parent is left behind: %s", d.Name())
		}
	}
}
