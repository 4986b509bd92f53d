// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
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

// hopScript pulls one image and looks at it by the name it pulled; with
// DIG set (a digest reference) it pulls that too, inspects and runs it by
// that reference, and builds FROM FROMDIG (another digest reference, not
// pulled before) with the legacy builder.
const hopScript = `set -u
cd "$WS"
export HOME="$WS" DOCKER_CONFIG="$WS/.docker" DOCKER_BUILDKIT=0
timeout 120 docker pull "$IMG" > pull.out 2>&1; echo "exit=$?" >> pull.out
timeout 60 docker image inspect -f '{{.Id}}' "$IMG" > inspect.out 2>&1; echo "exit=$?" >> inspect.out
if [ -n "${DIG:-}" ]; then
  timeout 120 docker pull "$DIG" > dpull.out 2>&1; echo "exit=$?" >> dpull.out
  timeout 60 docker image inspect -f '{{.Id}}' "$DIG" > dinspect.out 2>&1; echo "exit=$?" >> dinspect.out
  timeout 60 docker run --rm --network none "$DIG" cat ` + dockertest.MarkerPath + ` > drun.out 2>&1; echo "exit=$?" >> drun.out
  mkdir -p ctx && printf 'FROM %s\nRUN cat %s\n' "$FROMDIG" ` + dockertest.MarkerPath + ` > ctx/Dockerfile
  timeout 180 docker build --network none -t "built-$$:1" ctx > build.out 2>&1; echo "exit=$?" >> build.out
fi
touch done
`

// dockerConfig writes a docker client config in dir whose auths give
// user:pass for registry.
func dockerConfig(t *testing.T, dir, registry, user, pass string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	cfg := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, registry, auth)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDockerPullHops pulls in `sluice run --docker` sessions from a
// registry of the test's on 127.0.0.1 that, as Docker Hub does, answers
// 401 with a bearer challenge naming an auth realm on another host
// (127.0.0.2, which gives a token only for the account's login) and
// redirects blob fetches (307) to a blob host on a third (127.0.0.3).
// The unconfined twin pulls outside sluice with the login: the engine
// alone follows both, the realm and the blob host record its requests.
// In a session whose policy allows the three hosts, the pull works with
// the client's login through the broker's pull proxy and the image has
// the client's name, no proxy name left; a pull by digest is inspected
// and run by its digest reference, and a build FROM a digest reference
// builds. With the blob host missing from the policy the pull fails
// naming it, and it records nothing; with the realm missing it fails
// naming the realm, which records nothing.
func TestDockerPullHops(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	reg := dockertest.StartRegistry(t)
	realm := dockertest.StartRealm(t, "127.0.0.2")
	blobs := dockertest.StartBlobHost(t, "127.0.0.3", reg)
	twin := reg.AddImage(t, e, dockertest.BaseImage, "twin", "1")
	tools := reg.AddImage(t, e, dockertest.BaseImage, "tools", "1")
	dig := reg.AddImage(t, e, dockertest.BaseImage, "dig", "1")
	fromDig := reg.AddImage(t, e, dockertest.BaseImage, "fromdig", "1")
	noBlob := reg.AddImage(t, e, dockertest.BaseImage, "noblob", "1")
	noRealm := reg.AddImage(t, e, dockertest.BaseImage, "norealm", "1")
	const user = "agent"
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	pass := hex.EncodeToString(rnd[:])
	realm.RequireLogin(user, pass)
	reg.RequireToken(realm)
	reg.RedirectBlobs(blobs)
	port := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	regEntry := fmt.Sprintf(`{"host": "127.0.0.1", "ports": [%s]}`, port(reg.Addr))
	realmEntry := fmt.Sprintf(`{"host": "127.0.0.2", "ports": [%s]}`, port(realm.Addr))
	blobEntry := fmt.Sprintf(`{"host": "127.0.0.3", "ports": [%s]}`, port(blobs.Addr))
	bin, instance := embeddedSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The unconfined twin: the engine gets its token from the realm with
	// the login and follows the redirect to the blob host itself.
	twinCfg := filepath.Join(t.TempDir(), "docker")
	dockerConfig(t, twinCfg, reg.Addr, user, pass)
	if out, err := e.DockerWith(ctx, []string{"DOCKER_CONFIG=" + twinCfg}, "pull", reg.Addr+"/twin:1"); err != nil {
		t.Fatalf("the twin's pull: %v: %s", err, out)
	}
	if !dockertest.Saw(blobs.Requests(), "GET", blobs.Addr, "/blobs/"+twin.Config) {
		t.Fatalf("the blob host did not see the engine's GET of the twin's config: %v", blobs.Requests())
	}
	if !sawUser(realm.Requests(), realm.Addr, user) {
		t.Fatalf("the realm did not see the engine's token request with the login: %v", realm.Requests())
	}

	session := func(entries []string, img string, env ...string) (outs map[string]string, refusals []string) {
		t.Helper()
		ws := sessionWorkspace(t, bin)
		dockerConfig(t, filepath.Join(ws, ".docker"), reg.Addr, user, pass)
		policy := filepath.Join(t.TempDir(), "policy.json")
		if err := os.WriteFile(policy, []byte(`{"allowed_hosts": [`+strings.Join(entries, ", ")+`]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
		cmd := exec.CommandContext(ctx, bin, "run", "--user", "65534:65534", "--docker", "--docker-host", e.Host, "--allowlist", policy,
			"--audit-log", auditLog, "--", "sh", "-c", hopScript)
		cmd.Dir = ws
		cmd.Env = append(append(os.Environ(), "SLUICE_INSTANCE="+instance, "WS="+ws, "IMG="+img), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.WaitDelay = 10 * time.Second
		if err := cmd.Run(); err != nil {
			t.Errorf("sluice run --docker: %v", err)
		}
		t.Logf("sluice run (%v, %s):\n%s", entries, img, out.String())
		if _, err := os.Stat(filepath.Join(ws, "done")); err != nil {
			t.Fatalf("the script did not finish:\n%s", out.String())
		}
		outs = map[string]string{}
		for _, n := range []string{"pull", "inspect", "dpull", "dinspect", "drun", "build"} {
			b, _ := os.ReadFile(filepath.Join(ws, n+".out"))
			outs[n] = string(b)
		}
		for _, ev := range world.ReadAuditLog(t, auditLog) {
			if ev["type"] == "docker_refused" {
				refusals = append(refusals, fmt.Sprint(ev["message"]))
			}
		}
		return outs, refusals
	}

	// All three allowed: the pull works with the login, by the client's
	// name; by digest too, and a build FROM a digest reference.
	realmMark := len(realm.Requests())
	digRef := reg.Addr + "/dig@" + dig.Digest
	fromRef := reg.Addr + "/fromdig@" + fromDig.Digest
	outs, _ := session([]string{regEntry, realmEntry, blobEntry}, reg.Addr+"/tools:1", "DIG="+digRef, "FROMDIG="+fromRef)
	if !strings.HasSuffix(outs["pull"], "exit=0\n") {
		t.Errorf("the allowed pull: %q", outs["pull"])
	}
	if outs["inspect"] != tools.Config+"\nexit=0\n" {
		t.Errorf("docker image inspect %s/tools:1 in the session: %q, want %s", reg.Addr, outs["inspect"], tools.Config)
	}
	if !sawUser(realm.Requests()[realmMark:], realm.Addr, user) {
		t.Errorf("the realm did not get the session's login for a token: %v", realm.Requests()[realmMark:])
	}
	if !dockertest.Saw(blobs.Requests(), "GET", blobs.Addr, "/blobs/"+tools.Config) {
		t.Errorf("the blob host did not serve the allowed pull's config: %v", blobs.Requests())
	}
	if !strings.HasSuffix(outs["dpull"], "exit=0\n") || !strings.Contains(outs["dpull"], digRef) {
		t.Errorf("docker pull %s: %q", digRef, outs["dpull"])
	}
	if outs["dinspect"] != dig.Config+"\nexit=0\n" {
		t.Errorf("docker image inspect %s in the session: %q, want %s", digRef, outs["dinspect"], dig.Config)
	}
	if outs["drun"] != dig.Marker+"\nexit=0\n" {
		t.Errorf("docker run %s cat %s in the session: %q, want %s", digRef, dockertest.MarkerPath, outs["drun"], dig.Marker)
	}
	if !strings.HasSuffix(outs["build"], "exit=0\n") || !strings.Contains(outs["build"], fromDig.Marker) {
		t.Errorf("docker build FROM %s in the session: %q, want its marker %s printed", fromRef, outs["build"], fromDig.Marker)
	}
	if !dockertest.Saw(blobs.Requests(), "GET", blobs.Addr, "/blobs/"+fromDig.Config) {
		t.Errorf("the build's image was not pulled through the blob host: %v", blobs.Requests())
	}
	list, err := e.Docker(ctx, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}")
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`/[0-9a-f]{32}/[a-z]+:[^<]`).MatchString(list) || !strings.Contains(list, reg.Addr+"/tools:1") {
		t.Errorf("the engine's images after the pull: %s, want %s/tools:1 and no proxy name with a tag", list, reg.Addr)
	}

	// The blob host missing from the policy: refused by name, nothing
	// fetched from it.
	blobMark, realmMark := len(blobs.Requests()), len(realm.Requests())
	outs, refusals := session([]string{regEntry, realmEntry}, reg.Addr+"/noblob:1")
	want := "sends the pull to " + blobs.Addr + " (a redirect)"
	if strings.Contains(outs["pull"], "exit=0") || !strings.Contains(outs["pull"], want) {
		t.Errorf("the pull with the blob host refused: %q, want a failure saying %q", outs["pull"], want)
	}
	if !strings.Contains(strings.Join(refusals, "\n"), want) {
		t.Errorf("no docker_refused event saying %q: %q", want, refusals)
	}
	if n := blobs.Requests()[blobMark:]; len(n) != 0 {
		t.Errorf("the blob host the policy lacks got requests: %v", n)
	}
	if dockertest.Saw(blobs.Requests(), "GET", blobs.Addr, "/blobs/"+noBlob.Config) {
		t.Errorf("the blob host served the refused pull's config")
	}
	if !sawUser(realm.Requests()[realmMark:], realm.Addr, user) {
		t.Errorf("the allowed realm was not asked for a token with the login")
	}

	// The realm missing from the policy: refused by name, no token asked.
	blobMark, realmMark = len(blobs.Requests()), len(realm.Requests())
	outs, refusals = session([]string{regEntry, blobEntry}, reg.Addr+"/norealm:1")
	want = "sends the pull to " + realm.Addr + " (its auth realm, for a token)"
	if strings.Contains(outs["pull"], "exit=0") || !strings.Contains(outs["pull"], want) {
		t.Errorf("the pull with the realm refused: %q, want a failure saying %q", outs["pull"], want)
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

// sawUser: one of reqs reached host with the basic login of user.
func sawUser(reqs []dockertest.Request, host, user string) bool {
	for _, q := range reqs {
		if q.Host == host && q.Path == "/token" && q.User == user {
			return true
		}
	}
	return false
}
