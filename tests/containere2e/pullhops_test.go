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
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
	"github.com/sluice-dev/sluice/tests/world"
)

// hopScript pulls one image and looks at it by the name it pulled.
const hopScript = `set -u
cd "$WS"
export HOME="$WS" DOCKER_CONFIG="$WS/.docker"
timeout 120 docker pull "$IMG" > pull.out 2>&1; echo "exit=$?" >> pull.out
timeout 60 docker image inspect -f '{{.Id}}' "$IMG" > inspect.out 2>&1; echo "exit=$?" >> inspect.out
touch done
`

// TestDockerPullHops pulls in `sluice run --docker` sessions from a
// registry of the test's that, as Docker Hub does, asks for a bearer
// token from an auth realm on another port of 127.0.0.1 and redirects
// blob fetches (307) to a blob host on a third. The unconfined twin
// pulls outside sluice: the engine alone follows both, the realm and the
// blob host record its requests. In a session whose policy allows the
// registry, the realm and the blob host, the pull works through the
// broker's pull proxy and the image has the client's name, no proxy name
// left; with the blob host's port missing the pull fails naming the blob
// host, which records nothing; with the realm's port missing it fails
// naming the realm, which records nothing.
func TestDockerPullHops(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	reg := dockertest.StartRegistry(t)
	realm := dockertest.StartRealm(t)
	blobs := dockertest.StartBlobHost(t, reg)
	twin := reg.AddImage(t, e, dockertest.BaseImage, "twin", "1")
	tools := reg.AddImage(t, e, dockertest.BaseImage, "tools", "1")
	noBlob := reg.AddImage(t, e, dockertest.BaseImage, "noblob", "1")
	noRealm := reg.AddImage(t, e, dockertest.BaseImage, "norealm", "1")
	reg.RequireToken(realm)
	reg.RedirectBlobs(blobs)
	port := func(addr string) string { return strings.TrimPrefix(addr, "127.0.0.1:") }
	pA, pR, pB := port(reg.Addr), port(realm.Addr), port(blobs.Addr)
	bin, instance := embeddedSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// The unconfined twin: the engine gets its token from the realm and
	// follows the redirect to the blob host itself.
	if out, err := e.Docker(ctx, "pull", reg.Addr+"/twin:1"); err != nil {
		t.Fatalf("the twin's pull: %v: %s", err, out)
	}
	if !dockertest.Saw(blobs.Requests(), "GET", blobs.Addr, "/blobs/"+twin.Config) {
		t.Fatalf("the blob host did not see the engine's GET of the twin's config: %v", blobs.Requests())
	}
	if !dockertest.Saw(realm.Requests(), "GET", realm.Addr, "/token") {
		t.Fatalf("the realm did not see the engine's token request: %v", realm.Requests())
	}

	session := func(ports []string, img string) (pull, inspect string, refusals []string) {
		t.Helper()
		ws := sessionWorkspace(t, bin)
		policy := filepath.Join(t.TempDir(), "policy.json")
		if err := os.WriteFile(policy, []byte(fmt.Sprintf(`{"allowed_hosts": [{"host": "127.0.0.1", "ports": [%s]}]}`,
			strings.Join(ports, ", "))), 0o644); err != nil {
			t.Fatal(err)
		}
		auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
		cmd := exec.CommandContext(ctx, bin, "run", "--user", "65534:65534", "--docker", "--docker-host", e.Host, "--allowlist", policy,
			"--audit-log", auditLog, "--", "sh", "-c", hopScript)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance, "WS="+ws, "IMG="+img)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.WaitDelay = 10 * time.Second
		if err := cmd.Run(); err != nil {
			t.Errorf("sluice run --docker: %v", err)
		}
		t.Logf("sluice run (ports %v, %s):\n%s", ports, img, out.String())
		if _, err := os.Stat(filepath.Join(ws, "done")); err != nil {
			t.Fatalf("the script did not finish:\n%s", out.String())
		}
		p, _ := os.ReadFile(filepath.Join(ws, "pull.out"))
		i, _ := os.ReadFile(filepath.Join(ws, "inspect.out"))
		for _, ev := range world.ReadAuditLog(t, auditLog) {
			if ev["type"] == "docker_refused" {
				refusals = append(refusals, fmt.Sprint(ev["message"]))
			}
		}
		return string(p), string(i), refusals
	}

	// All three allowed: the pull works, by the client's name.
	pull, inspect, _ := session([]string{pA, pR, pB}, reg.Addr+"/tools:1")
	if !strings.HasSuffix(pull, "exit=0\n") {
		t.Errorf("the allowed pull: %q", pull)
	}
	if inspect != tools.Config+"\nexit=0\n" {
		t.Errorf("docker image inspect %s/tools:1 in the session: %q, want %s", reg.Addr, inspect, tools.Config)
	}
	if !dockertest.Saw(blobs.Requests(), "GET", blobs.Addr, "/blobs/"+tools.Config) {
		t.Errorf("the blob host did not serve the allowed pull's config: %v", blobs.Requests())
	}
	list, err := e.Docker(ctx, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}")
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`/[0-9a-f]{32}/`).MatchString(list) || !strings.Contains(list, reg.Addr+"/tools:1") {
		t.Errorf("the engine's images after the pull: %s, want %s/tools:1 and no proxy name", list, reg.Addr)
	}

	// The blob host's port missing: refused by name, nothing fetched.
	blobMark, realmMark := len(blobs.Requests()), len(realm.Requests())
	pull, _, refusals := session([]string{pA, pR}, reg.Addr+"/noblob:1")
	want := "sends the pull to " + blobs.Addr + " (a redirect)"
	if strings.Contains(pull, "exit=0") || !strings.Contains(pull, want) {
		t.Errorf("the pull with the blob host refused: %q, want a failure saying %q", pull, want)
	}
	if !strings.Contains(strings.Join(refusals, "\n"), want) {
		t.Errorf("no docker_refused event saying %q: %q", want, refusals)
	}
	if n := blobs.Requests()[blobMark:]; len(n) != 0 {
		t.Errorf("the blob host the policy lacks got requests: %v", n)
	}
	_ = noBlob
	if len(realm.Requests()) == realmMark {
		t.Errorf("the allowed realm was not asked for a token")
	}

	// The realm's port missing: refused by name, no token asked.
	blobMark, realmMark = len(blobs.Requests()), len(realm.Requests())
	pull, _, refusals = session([]string{pA, pB}, reg.Addr+"/norealm:1")
	want = "sends the pull to " + realm.Addr + " (its auth realm, for a token)"
	if strings.Contains(pull, "exit=0") || !strings.Contains(pull, want) {
		t.Errorf("the pull with the realm refused: %q, want a failure saying %q", pull, want)
	}
	if !strings.Contains(strings.Join(refusals, "\n"), want) {
		t.Errorf("no docker_refused event saying %q: %q", want, refusals)
	}
	if n := realm.Requests()[realmMark:]; len(n) != 0 {
		t.Errorf("the realm the policy lacks got requests: %v", n)
	}
	if dockertest.Saw(blobs.Requests()[blobMark:], "GET", blobs.Addr, "/blobs/"+noRealm.Config) {
		t.Errorf("the blob host served the refused pull")
	}
}
