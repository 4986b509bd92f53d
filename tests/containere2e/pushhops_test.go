// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"bytes"
	"context"
	"crypto/rand"
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

// pushHopScript pushes one image and lists the images the session sees.
const pushHopScript = `set -u
cd "$WS"
export HOME="$WS" DOCKER_CONFIG="$WS/.docker"
timeout 180 docker push "$IMG" > push.out 2>&1; echo "exit=$?" >> push.out
timeout 60 docker image ls --format '{{.Repository}}:{{.Tag}}' > images.out 2>&1; echo "exit=$?" >> images.out
touch done
`

// proxyNameRE is a name of the broker's registry proxy: a token path.
var proxyNameRE = regexp.MustCompile(`/[0-9a-f]{32}/`)

// uniqueImage builds an image of one layer of random bytes (FROM scratch,
// nothing run) named name: no registry has its layer, so a push of it
// must upload it.
func uniqueImage(t *testing.T, ctx context.Context, e *dockertest.Engine, name string) {
	t.Helper()
	dir := t.TempDir()
	data := make([]byte, 2<<20)
	_, _ = rand.Read(data)
	if err := os.WriteFile(filepath.Join(dir, "blob"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY blob /blob\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := e.DockerWith(ctx, []string{"DOCKER_BUILDKIT=0"}, "build", "-q", "-t", name, dir); err != nil {
		t.Fatalf("build %s: %v: %s", name, err, out)
	}
}

// TestDockerPushHops pushes in `sluice run --docker` sessions to a
// registry of the test's on 127.0.0.1 that answers 401 with a bearer
// challenge naming an auth realm on 127.0.0.2 (a token only for the
// account's login) and answers every upload's start with a Location on
// an upload host on 127.0.0.4, which takes the blob's parts for the
// registry. The unconfined twin pushes outside sluice with the login: the
// engine alone follows both, the realm and the upload host record its
// requests and the registry then holds its manifest. In a session whose
// policy allows the three hosts (with their ports) the push works through
// the broker's proxy: the realm gets the login, the upload host the
// parts, the registry holds the manifest whose digest the client printed,
// and no proxy name is left on the image. With the upload host missing
// from the policy the push fails naming it, the upload host records
// nothing, the registry holds nothing and the audit log has the refusal;
// the same with the realm missing.
func TestDockerPushHops(t *testing.T) {
	e := dockertest.Start(t)
	reg := dockertest.StartRegistry(t)
	realm := dockertest.StartRealm(t, "127.0.0.2")
	uploads := dockertest.StartUploadHost(t, "127.0.0.4", reg)
	const user = "agent"
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	pass := hex.EncodeToString(rnd[:])
	realm.RequireLogin(user, pass)
	reg.RequireToken(realm)
	reg.RedirectUploads(uploads)
	port := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	regEntry := fmt.Sprintf(`{"host": "127.0.0.1", "ports": [%s]}`, port(reg.Addr))
	realmEntry := fmt.Sprintf(`{"host": "127.0.0.2", "ports": [%s]}`, port(realm.Addr))
	uploadEntry := fmt.Sprintf(`{"host": "127.0.0.4", "ports": [%s]}`, port(uploads.Addr))
	bin, instance := embeddedSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	for _, n := range []string{"twin", "tools", "noup", "norealm"} {
		uniqueImage(t, ctx, e, reg.Addr+"/"+n+":1")
	}
	sawUpload := func(reqs []dockertest.Request) bool {
		for _, q := range reqs {
			if q.Method == "PATCH" && q.Host == uploads.Addr {
				return true
			}
		}
		return false
	}

	// The unconfined twin: the engine gets its token from the realm with
	// the login and sends the blobs to the upload host itself.
	twinCfg := filepath.Join(t.TempDir(), "docker")
	dockerConfig(t, twinCfg, reg.Addr, user, pass)
	if out, err := e.DockerWith(ctx, []string{"DOCKER_CONFIG=" + twinCfg}, "push", reg.Addr+"/twin:1"); err != nil {
		t.Fatalf("the twin's push: %v: %s", err, out)
	}
	if !sawUpload(uploads.Requests()) {
		t.Fatalf("the upload host did not see the engine's PATCH: %v", uploads.Requests())
	}
	if !sawUser(realm.Requests(), realm.Addr, user) {
		t.Fatalf("the realm did not see the engine's token request with the login: %v", realm.Requests())
	}
	if reg.Tagged("twin", "1") == "" {
		t.Fatalf("the registry holds no twin:1 after the twin's push: %v", reg.Requests())
	}

	session := func(entries []string, img string) (outs map[string]string, refusals []string) {
		t.Helper()
		ws := sessionWorkspace(t, bin)
		dockerConfig(t, filepath.Join(ws, ".docker"), reg.Addr, user, pass)
		policy := filepath.Join(t.TempDir(), "policy.json")
		if err := os.WriteFile(policy, []byte(`{"allowed_hosts": [`+strings.Join(entries, ", ")+`]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
		cmd := exec.CommandContext(ctx, bin, "run", "--user", "65534:65534", "--docker", "--docker-host", e.Host, "--allowlist", policy,
			"--audit-log", auditLog, "--", "sh", "-c", pushHopScript)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance, "WS="+ws, "IMG="+img)
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
		for _, n := range []string{"push", "images"} {
			b, _ := os.ReadFile(filepath.Join(ws, n+".out"))
			outs[n] = string(b)
		}
		t.Logf("%s's push:\n%s", img, outs["push"])
		for _, ev := range world.ReadAuditLog(t, auditLog) {
			if ev["type"] == "docker_refused" {
				refusals = append(refusals, fmt.Sprint(ev["message"]))
			}
		}
		return outs, refusals
	}
	// noProxyName: the image keeps the client's name and has no name of
	// the proxy's, tag or digest reference, as the engine and the
	// session see it.
	noProxyName := func(name string, outs map[string]string) {
		t.Helper()
		names, err := e.Docker(ctx, "image", "inspect", "-f", "{{json .RepoTags}} {{json .RepoDigests}}", name)
		if err != nil {
			t.Fatal(err)
		}
		if proxyNameRE.MatchString(names) || !strings.Contains(names, `"`+name+`"`) {
			t.Errorf("the names of %s after the push: %s, want its own and no proxy name", name, names)
		}
		list, err := e.Docker(ctx, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}")
		if err != nil {
			t.Fatal(err)
		}
		if proxyNameRE.MatchString(list) || proxyNameRE.MatchString(outs["images"]) || !strings.HasSuffix(outs["images"], "exit=0\n") {
			t.Errorf("the engine's images after the push: %s; the session's: %s; want no proxy name", list, outs["images"])
		}
	}

	// All three allowed: the push works with the login, every hop through
	// the proxy.
	realmMark, upMark := len(realm.Requests()), len(uploads.Requests())
	outs, refusals := session([]string{regEntry, realmEntry, uploadEntry}, reg.Addr+"/tools:1")
	if !strings.HasSuffix(outs["push"], "exit=0\n") {
		t.Errorf("the allowed push: %q", outs["push"])
	}
	pushed := reg.Tagged("tools", "1")
	if pushed == "" || !strings.Contains(outs["push"], "1: digest: "+pushed) {
		t.Errorf("the registry holds tools:1 as %q; the client printed %q", pushed, outs["push"])
	}
	if !strings.Contains(outs["push"], "The push refers to repository ["+reg.Addr+"/tools]") || proxyNameRE.MatchString(outs["push"]) {
		t.Errorf("the push's output does not name the client's image, or names the proxy's: %q", outs["push"])
	}
	if !sawUser(realm.Requests()[realmMark:], realm.Addr, user) {
		t.Errorf("the realm did not get the session's login for a token: %v", realm.Requests()[realmMark:])
	}
	if !sawUpload(uploads.Requests()[upMark:]) {
		t.Errorf("the upload host got no part of the allowed push: %v", uploads.Requests()[upMark:])
	}
	if len(refusals) != 0 {
		t.Errorf("refusals in the allowed push: %q", refusals)
	}
	noProxyName(reg.Addr+"/tools:1", outs)

	// The upload host missing from the policy: refused by name, nothing
	// sent to it, nothing pushed.
	realmMark, upMark = len(realm.Requests()), len(uploads.Requests())
	outs, refusals = session([]string{regEntry, realmEntry}, reg.Addr+"/noup:1")
	want := "sends the push to " + uploads.Addr + " (its upload Location)"
	if strings.Contains(outs["push"], "exit=0") || !strings.Contains(outs["push"], want) {
		t.Errorf("the push with the upload host refused: %q, want a failure saying %q", outs["push"], want)
	}
	if !strings.Contains(strings.Join(refusals, "\n"), want) {
		t.Errorf("no docker_refused event saying %q: %q", want, refusals)
	}
	if n := uploads.Requests()[upMark:]; len(n) != 0 {
		t.Errorf("the upload host the policy lacks got requests: %v", n)
	}
	if d := reg.Tagged("noup", "1"); d != "" {
		t.Errorf("the registry holds noup:1 (%s) after the refused push", d)
	}
	if !sawUser(realm.Requests()[realmMark:], realm.Addr, user) {
		t.Errorf("the allowed realm was not asked for a token with the login")
	}
	noProxyName(reg.Addr+"/noup:1", outs)

	// The realm missing from the policy: refused by name, no token asked,
	// nothing uploaded.
	realmMark, upMark = len(realm.Requests()), len(uploads.Requests())
	outs, refusals = session([]string{regEntry, uploadEntry}, reg.Addr+"/norealm:1")
	want = "sends the push to " + realm.Addr + " (its auth realm, for a token)"
	if strings.Contains(outs["push"], "exit=0") || !strings.Contains(outs["push"], want) {
		t.Errorf("the push with the realm refused: %q, want a failure saying %q", outs["push"], want)
	}
	if !strings.Contains(strings.Join(refusals, "\n"), want) {
		t.Errorf("no docker_refused event saying %q: %q", want, refusals)
	}
	if n := realm.Requests()[realmMark:]; len(n) != 0 {
		t.Errorf("the realm the policy lacks got requests: %v", n)
	}
	if n := uploads.Requests()[upMark:]; len(n) != 0 {
		t.Errorf("the upload host got requests of a push with no token: %v", n)
	}
	if d := reg.Tagged("norealm", "1"); d != "" {
		t.Errorf("the registry holds norealm:1 (%s) after the refused push", d)
	}
	noProxyName(reg.Addr+"/norealm:1", outs)
}
