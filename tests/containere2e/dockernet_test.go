// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
	"github.com/sluice-dev/sluice/tests/world"
)

// dockerNetScript makes a volume and a network of the session's own, runs
// a container with both, probes a denied world host from it, then tries
// another's volume and network and the options that touch the machine.
const dockerNetScript = `set -u
cd "$WS"
export HOME="$WS" DOCKER_CONFIG="$WS/.docker"
r() { n=$1; shift; timeout 60 docker "$@" > "$n.out" 2>&1; echo "exit=$?" >> "$n.out"; }
r volcreate volume create v1
r netcreate network create n1
r agent run -d --name agent -v v1:/data --network n1 -v "$WS/probe:/usr/local/bin/probe:ro" "$IMG" sleep 600
touch started
i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
docker exec agent probe tcp "$DENIED" "$DPORT" > denied.json 2> denied.err
r write exec agent sh -c 'echo kept > /data/f && cat /data/f'
r volls volume ls --format '{{.Name}}'
r netls network ls --format '{{.Name}}'
r volrm volume rm othervol
r netrm network rm othernet
r usevol run --rm -v othervol:/d "$IMG" true
r usenet run --rm --network othernet "$IMG" true
r netopt network create -o com.docker.network.bridge.name=x n2
r netsub network create --subnet 10.99.0.0/24 n3
r volopt volume create -o type=none -o o=bind -o device=/etc v3
touch done
`

// TestDockerNetworksVolumesInSession: a `sluice run --docker` session
// creates a volume and a network (labelled as its own), runs a container
// on them that is still the session's (its cgroup parent, its denial:
// EPERM and nothing in the world, while the unconfined twin arrives),
// sees only its own in the lists, is refused another's volume and
// network and the options that touch the machine; the session's end
// removes its volume and network and leaves the others'.
func TestDockerNetworksVolumesInSession(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	w := world.New(t)
	deniedPort := w.ListenTCP(t, world.DeniedV4)
	bin, instance := embeddedSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Another's volume and network.
	for _, args := range [][]string{{"volume", "create", "othervol"}, {"network", "create", "othernet"}} {
		if _, err := e.Docker(ctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	mark := twinReachesDenied(t, w, deniedPort)

	ws := sessionWorkspace(t, bin)
	run := startDockerRun(ctx, t, bin, instance, e.Host, ws, []string{"--allow", world.AllowedV4.String() + "/32"}, dockerNetScript,
		"DENIED="+world.DeniedV4.String(), "DPORT="+fmt.Sprint(deniedPort))
	read, out := run.read, run.out
	run.waitFile("started", 60*time.Second, "volcreate", "netcreate", "agent")
	for _, c := range []struct{ args []string }{
		{[]string{"volume", "inspect", "-f", `{{index .Labels "sluice.session"}}`, "v1"}},
		{[]string{"network", "inspect", "-f", `{{index .Labels "sluice.session"}}`, "n1"}},
	} {
		label, err := e.Docker(ctx, c.args...)
		if err != nil || strings.TrimSpace(label) == "" {
			t.Errorf("%v: %q %v, want the session's label", c.args, label, err)
		}
	}
	info, err := e.Docker(ctx, "inspect", "-f", `{{index .Config.Labels "sluice.session"}} {{.HostConfig.CgroupParent}} {{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}} {{range .Mounts}}{{.Name}}{{end}}`, "agent")
	if err != nil {
		t.Fatalf("inspect agent: %v\n%s", err, read("agent"))
	}
	if f := strings.Fields(info); len(f) != 4 || f[0] == "" || f[1] != "/"+instance || f[2] != "n1" || f[3] != "v1" {
		t.Errorf("the agent's container: label, cgroup parent, networks, volumes = %q, want a label, /%s, n1, v1", info, instance)
	}
	run.touch("go")
	run.end(3 * time.Minute)
	if r := readProbe(t, filepath.Join(ws, "denied.json")); r.OK || r.Errno != "EPERM" {
		b, _ := os.ReadFile(filepath.Join(ws, "denied.err"))
		t.Errorf("the session's container on n1 to a denied host: %s %s, want EPERM", r, b)
	}
	w.AssertNothingArrived(t, world.All(world.To(world.DeniedV4), world.Since(mark)), 200*time.Millisecond)
	if !strings.Contains(out.String(), "sluice: denied") {
		t.Errorf("the session's terminal has no denial line for its container")
	}
	for name, want := range map[string]string{
		"volcreate": "v1\nexit=0\n",
		"netcreate": "exit=0\n",
		"write":     "kept\nexit=0\n",
		"volls":     "v1\nexit=0\n",
		"netls":     "n1\nexit=0\n",
	} {
		if s := read(name); !strings.HasSuffix(s, want) || name == "netls" && s != want || name == "volls" && s != want {
			t.Errorf("%s: %q, want it to end %q", name, s, want)
		}
	}
	for name, want := range map[string]string{
		"volrm":  "othervol is not a volume of this session",
		"netrm":  "othernet is not a network of this session",
		"usevol": "the volume othervol is not this session's",
		"usenet": "--network othernet",
		"netopt": "--opt com.docker.network.bridge.name",
		"netsub": "--subnet",
		"volopt": "--opt",
	} {
		if s := read(name); !strings.Contains(s, "sluice: refused") || !strings.Contains(s, want) || strings.Contains(s, "exit=0") {
			t.Errorf("%s: %q, want a refusal saying %q", name, s, want)
		}
	}
	// The session's end removed its volume and network, not the others'.
	vols, err := e.Docker(ctx, "volume", "ls", "--format", "{{.Name}}")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Fields(vols) == nil || strings.Contains(vols, "v1") || !strings.Contains(vols, "othervol") {
		t.Errorf("volumes after the session: %q, want othervol and no v1", vols)
	}
	nets, err := e.Docker(ctx, "network", "ls", "--format", "{{.Name}}")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(nets, "n1") || !strings.Contains(nets, "othernet") {
		t.Errorf("networks after the session: %q, want othernet and no n1", nets)
	}
}
