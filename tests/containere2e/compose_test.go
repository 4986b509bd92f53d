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
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

// composeScript brings a compose project up in the session, checks it,
// probes a denied world host from its service, and takes it down.
const composeScript = `set -u
cd "$WS"
export HOME="$WS" DOCKER_CONFIG="$WS/.docker"
r() { n=$1; shift; timeout 90 "$@" > "$n.out" 2>&1; echo "exit=$?" >> "$n.out"; }
r up docker-compose -p proj up -d
r ps docker-compose -p proj ps --services
r exec docker-compose -p proj exec -T app cat /data/f
r built docker-compose -p proj exec -T tool cat /built
docker-compose -p proj exec -T app probe tcp "$DENIED" "$DPORT" > denied.json 2> denied.err
r others docker network ls --format '{{.Name}}'
r down docker-compose -p proj down -v
`

// composeFile is a service with a named volume on the project's default
// network: compose makes both; and a service compose builds first (the
// legacy builder, through the broker's judged build).
const composeFile = `version: "3.4"
services:
  tool:
    build:
      context: ./tool
      network: none
    command: sleep 600
  app:
    image: %s
    command: sh -c 'echo kept > /data/f; exec sleep 600'
    volumes:
      - data:/data
      - ./probe:/usr/local/bin/probe:ro
volumes:
  data: {}
`

// TestDockerComposeInSession runs Debian's docker-compose in a `sluice
// run --docker` session: up builds a service (a judged legacy build) and
// makes the project's network, volume and containers through the broker
// (labelled as the session's), exec reaches
// the service, the service's connection to a denied host gets EPERM and
// the world records nothing (the unconfined twin arrives), and down
// removes all of it; another's network stays.
func TestDockerComposeInSession(t *testing.T) {
	if _, err := exec.LookPath("docker-compose"); err != nil {
		needs.Skip(t, "the compose test needs docker-compose (apt-get install docker-compose)")
	}
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	w := world.New(t)
	deniedPort := w.ListenTCP(t, world.DeniedV4)
	bin, instance := embeddedSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := e.Docker(ctx, "network", "create", "othernet"); err != nil {
		t.Fatal(err)
	}
	mark := twinReachesDenied(t, w, deniedPort)

	ws := sessionWorkspace(t, bin)
	if err := os.WriteFile(filepath.Join(ws, "docker-compose.yml"), fmt.Appendf(nil, composeFile, dockertest.BaseImage), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "tool", "Dockerfile"), fmt.Appendf(nil, "FROM %s\nRUN echo built-in-the-session > /built\n", dockertest.BaseImage), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "run", "--user", "65534:65534", "--docker", "--docker-host", e.Host, "--", "sh", "-c", composeScript)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance, "WS="+ws,
		"DENIED="+world.DeniedV4.String(), "DPORT="+fmt.Sprint(deniedPort))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		t.Errorf("sluice run --docker: %v", err)
	}
	t.Logf("sluice run:\n%s", out.String())
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(ws, name+".out"))
		return string(b)
	}
	for name, want := range map[string]string{
		"up":     "exit=0\n",
		"ps":     "tool\napp\nexit=0\n",
		"exec":   "kept\nexit=0\n",
		"built":  "built-in-the-session\nexit=0\n",
		"others": "proj_default\nexit=0\n",
		"down":   "exit=0\n",
	} {
		if s := read(name); !strings.HasSuffix(s, want) || name != "up" && name != "down" && name != "built" && s != want {
			t.Errorf("%s: %q, want %q", name, s, want)
		}
	}
	if r := readProbe(t, filepath.Join(ws, "denied.json")); r.OK || r.Errno != "EPERM" {
		b, _ := os.ReadFile(filepath.Join(ws, "denied.err"))
		t.Errorf("the compose service to a denied host: %s %s, want EPERM", r, b)
	}
	w.AssertNothingArrived(t, world.All(world.To(world.DeniedV4), world.Since(mark)), 200*time.Millisecond)
	if strings.Contains(out.String(), "sluice: docker: refused") {
		t.Errorf("the broker refused part of compose's work")
	}
	left, err := e.Docker(ctx, "ps", "-a", "--format", "{{.Names}}")
	if err != nil {
		t.Fatal(err)
	}
	nets, err := e.Docker(ctx, "network", "ls", "--format", "{{.Name}}")
	if err != nil {
		t.Fatal(err)
	}
	vols, err := e.Docker(ctx, "volume", "ls", "--format", "{{.Name}}")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(left) != "" || strings.Contains(nets, "proj_") || !strings.Contains(nets, "othernet") || strings.Contains(vols, "proj_") {
		t.Errorf("after down: containers %q, networks %q, volumes %q; want none of the project's and othernet kept", left, nets, vols)
	}
}
