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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
	"github.com/sluice-dev/sluice/tests/world"
)

// pullScript is the agent of TestDockerPull: it pulls from the registry
// its policy allows, looks at the image and runs it, pushes it back, then
// pulls and pushes by the same address on another port and by a name
// its policy lacks for the allowed registry. Each attempt's output and
// exit status go to a file of the workspace.
const pullScript = `set -u
cd "$WS"
export HOME="$WS" DOCKER_CONFIG="$WS/.docker"
r() { n=$1; shift; timeout 120 docker "$@" > "$n.out" 2>&1; echo "exit=$?" >> "$n.out"; }
r pull pull "127.0.0.1:$PA/tools:1"
r inspect image inspect -f '{{.Id}}' "127.0.0.1:$PA/tools:1"
r run run --rm --network none "127.0.0.1:$PA/tools:1" cat "$MARKER"
r push push "127.0.0.1:$PA/tools:1"
r portpull pull "127.0.0.1:$PB/tools:1"
r portpush push "127.0.0.1:$PB/tools:1"
r namepull pull "localhost:$PA/named:1"
r namepush push "localhost:$PA/named:1"
touch done
`

// TestDockerPull runs `docker pull` and `docker push` in a `sluice run
// --docker` session against registries of the test's own on loopback
// (plain HTTP). The policy allows 127.0.0.1 on one port, the allowed
// registry's: a pull from it works (the registry saw the manifest, config
// and layer fetched, the image runs and shows the registry's marker), and
// so does a push back to it. The unconfined twin first pulls and pushes
// the same way outside sluice from a second registry on another port of
// 127.0.0.1, and from the allowed registry by the name localhost: both
// reach their registry. In the session those are refused by the broker
// with its reasons (the port is not in the entry's rule, localhost is not
// in the allowlist), and the registries record nothing more.
func TestDockerPull(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	allowed := dockertest.StartRegistry(t)
	tools := allowed.AddImage(t, e, dockertest.BaseImage, "tools", "1")
	named := allowed.AddImage(t, e, dockertest.BaseImage, "named", "1")
	other := dockertest.StartRegistry(t)
	otherTools := other.AddImage(t, e, dockertest.BaseImage, "tools", "1")
	portA := strings.TrimPrefix(allowed.Addr, "127.0.0.1:")
	portB := strings.TrimPrefix(other.Addr, "127.0.0.1:")
	bin, instance := embeddedSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The unconfined twin: outside sluice, the engine pulls and pushes
	// by the other port, and reaches the allowed registry by localhost.
	byPort := other.Addr + "/tools:1"
	if _, err := e.Docker(ctx, "pull", byPort); err != nil {
		t.Fatalf("the twin's pull of %s: %v", byPort, err)
	}
	if _, err := e.Docker(ctx, "push", byPort); err != nil {
		t.Fatalf("the twin's push of %s: %v", byPort, err)
	}
	reqs := other.Requests()
	if !sawManifest(reqs, other.Addr, otherTools) || !dockertest.Saw(reqs, "GET", other.Addr, "/v2/tools/blobs/"+otherTools.Config) ||
		!dockertest.Saw(reqs, "PUT", other.Addr, "/v2/tools/manifests/1") {
		t.Fatalf("the other registry did not see the twin's pull and push: %v", reqs)
	}
	otherMark := len(reqs)
	byName := "localhost:" + portA + "/named:1"
	if _, err := e.Docker(ctx, "pull", byName); err != nil {
		t.Fatalf("the twin's pull of %s: %v", byName, err)
	}
	if !sawManifest(allowed.Requests(), "localhost:"+portA, named) {
		t.Fatalf("the allowed registry did not see the twin's pull by localhost: %v", allowed.Requests())
	}
	allowedMark := len(allowed.Requests())

	ws := sessionWorkspace(t, bin)
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(fmt.Sprintf(`{"allowed_hosts": [{"host": "127.0.0.1", "ports": [%s]}]}`, portA)), 0o644); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	cmd := exec.CommandContext(ctx, bin, "run", "--user", "65534:65534", "--docker", "--docker-host", e.Host, "--allowlist", policy,
		"--audit-log", auditLog, "--", "sh", "-c", pullScript)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance, "WS="+ws, "PA="+portA, "PB="+portB, "MARKER="+dockertest.MarkerPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		t.Errorf("sluice run --docker: %v", err)
	}
	t.Logf("sluice run:\n%s", out.String())
	if _, err := os.Stat(filepath.Join(ws, "done")); err != nil {
		t.Fatalf("the script did not finish:\n%s", out.String())
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(ws, name+".out"))
		return string(b)
	}

	// The allowed pull: the broker passed it and the registry served it,
	// by the address the policy allows.
	if s := read("pull"); !strings.HasSuffix(s, "exit=0\n") {
		t.Errorf("docker pull 127.0.0.1:%s/tools:1 in the session: %q, want it pulled", portA, s)
	}
	seen := allowed.Requests()[allowedMark:]
	if !sawManifest(seen, allowed.Addr, tools) {
		t.Errorf("the allowed registry did not serve the manifest of the session's pull: %v", seen)
	}
	for _, p := range []string{"/v2/tools/blobs/" + tools.Config, "/v2/tools/blobs/" + tools.Layers[len(tools.Layers)-1]} {
		if !dockertest.Saw(seen, "GET", allowed.Addr, p) {
			t.Errorf("the allowed registry did not see GET %s for the session's pull: %v", p, seen)
		}
	}
	if s := read("inspect"); s != tools.Config+"\nexit=0\n" {
		t.Errorf("docker image inspect in the session: %q, want the registry's config %s", s, tools.Config)
	}
	if s := read("run"); s != tools.Marker+"\nexit=0\n" {
		t.Errorf("docker run of the pulled image in the session: %q, want its marker %s", s, tools.Marker)
	}
	if s := read("push"); !strings.HasSuffix(s, "exit=0\n") || !dockertest.Saw(seen, "PUT", allowed.Addr, "/v2/tools/manifests/1") {
		t.Errorf("docker push 127.0.0.1:%s/tools:1 in the session: %q; the registry saw %v", portA, s, seen)
	}

	// The refused ones: the broker's reasons, on the terminal and in the
	// audit log, and nothing more at either registry by those names.
	var refusals []string
	for _, ev := range world.ReadAuditLog(t, auditLog) {
		if ev["type"] == "docker_refused" {
			refusals = append(refusals, fmt.Sprint(ev["message"]))
		}
	}
	portWhy := fmt.Sprintf(`the registry 127.0.0.1:%s: port %s is not in the rule "127.0.0.1" ports %s`, portB, portB, portA)
	nameWhy := fmt.Sprintf("the registry localhost:%s is not in the session's allowlist", portA)
	for name, want := range map[string]string{
		"portpull": "refused pull of 127.0.0.1:" + portB + "/tools: " + portWhy,
		"portpush": "refused push of 127.0.0.1:" + portB + "/tools: " + portWhy,
		"namepull": "refused pull of localhost:" + portA + "/named: " + nameWhy,
		"namepush": "refused push of localhost:" + portA + "/named: " + nameWhy,
	} {
		if s := read(name); !strings.Contains(s, "sluice: "+want) || strings.Contains(s, "exit=0") {
			t.Errorf("%s: %q, want the broker's refusal %q", name, s, want)
		}
		if !slices.ContainsFunc(refusals, func(m string) bool { return strings.Contains(m, want) }) {
			t.Errorf("%s: no docker_refused event saying %q in the audit log: %q", name, want, refusals)
		}
	}
	if n := other.Requests()[otherMark:]; len(n) != 0 {
		t.Errorf("the registry on the port the policy lacks saw the session's requests: %v", n)
	}
	for _, q := range allowed.Requests()[allowedMark:] {
		if q.Host != allowed.Addr || strings.Contains(q.Path, "/named/") {
			t.Errorf("the allowed registry saw %s from the session, by a name or for an image the policy does not allow", q)
		}
	}
}

// sawManifest reports whether the registry, reached as host, was asked
// for img's tag (the engine asks with HEAD, then fetches by digest) and
// served its manifest.
func sawManifest(reqs []dockertest.Request, host string, img *dockertest.Image) bool {
	tag := "/v2/" + img.Repo + "/manifests/" + img.Tag
	asked := dockertest.Saw(reqs, "HEAD", host, tag) || dockertest.Saw(reqs, "GET", host, tag)
	return asked && (dockertest.Saw(reqs, "GET", host, tag) || dockertest.Saw(reqs, "GET", host, "/v2/"+img.Repo+"/manifests/"+img.Digest))
}
