// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
	"github.com/sluice-dev/sluice/tests/world"
)

// addScript builds twice with the legacy builder: an ADD of FILEURL whose
// RUN step prints the file, and an ADD of OUTURL, which redirects.
const addScript = `set -u
cd "$WS"
export HOME="$WS" DOCKER_CONFIG="$WS/.docker" DOCKER_BUILDKIT=0
mkdir -p ctx
printf 'FROM %s\nADD %s /f\nRUN cat /f\n' "$IMG" "$FILEURL" > ctx/file.Dockerfile
timeout 180 docker build --no-cache --network none -f ctx/file.Dockerfile ctx > file.out 2>&1; echo "exit=$?" >> file.out
printf 'FROM %s\nADD %s /g\n' "$IMG" "$OUTURL" > ctx/out.Dockerfile
timeout 180 docker build --no-cache --network none -f ctx/out.Dockerfile ctx > out.out 2>&1; echo "exit=$?" >> out.out
touch done
`

// recordingHost is an HTTP server on a loopback address of the test's
// that records every request it gets.
type recordingHost struct {
	Addr string
	mu   sync.Mutex
	reqs []string
}

func startRecordingHost(t *testing.T, ip string, h http.HandlerFunc) *recordingHost {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	rh := &recordingHost{Addr: l.Addr().String()}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rh.mu.Lock()
		rh.reqs = append(rh.reqs, r.Method+" "+r.URL.RequestURI())
		rh.mu.Unlock()
		h(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return rh
}

func (rh *recordingHost) requests() []string {
	rh.mu.Lock()
	defer rh.mu.Unlock()
	return append([]string(nil), rh.reqs...)
}

// TestDockerBuildAddHops: a build's ADD of a URL on an allowed host that
// redirects (an open redirect, as many sites have) to a host the policy
// lacks. The engine fetches ADD URLs itself and follows redirects: the
// unconfined twin's build delivers the URL's secret to the other host.
// In a `sluice run --docker` session whose policy allows only the first
// host, the engine fetches through the broker's fetch proxy: an ADD of a
// file there works (its RUN step prints it, and the step's line names the
// URL as written), the redirecting ADD fails naming the other host, which
// records nothing, and the refusal is in the audit log.
func TestDockerBuildAddHops(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	content := "add-marker-" + hex.EncodeToString(rnd[:])
	other := startRecordingHost(t, "127.0.0.6", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "other") })
	allowed := startRecordingHost(t, "127.0.0.5", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/file":
			_, _ = io.WriteString(w, content+"\n")
		case "/out":
			http.Redirect(w, r, "http://"+other.Addr+"/x?"+r.URL.RawQuery, http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})
	_, port, _ := net.SplitHostPort(allowed.Addr)
	fileURL := "http://" + allowed.Addr + "/file"
	bin, instance := embeddedSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// The unconfined twin: the engine follows the redirect itself.
	twinCtx := t.TempDir()
	secret := "d=twin-" + hex.EncodeToString(rnd[:4])
	if err := os.WriteFile(filepath.Join(twinCtx, "Dockerfile"), []byte(fmt.Sprintf("FROM %s\nADD http://%s/out?%s /g\n", dockertest.BaseImage, allowed.Addr, secret)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := e.DockerWith(ctx, []string{"DOCKER_BUILDKIT=0"}, "build", "--no-cache", "--network", "none", twinCtx); err != nil {
		t.Fatalf("the twin's build: %v\n%s", err, out)
	}
	if got := strings.Join(other.requests(), "\n"); !strings.Contains(got, "GET /x?"+secret) {
		t.Fatalf("the other host did not get the twin's redirected fetch: %q", got)
	}
	otherMark := len(other.requests())

	ws := sessionWorkspace(t, bin)
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(fmt.Sprintf(`{"allowed_hosts": [{"host": "127.0.0.5", "ports": [%s]}]}`, port)), 0o644); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(t.TempDir(), "audit.jsonl")
	outURL := "http://" + allowed.Addr + "/out?d=session-" + hex.EncodeToString(rnd[4:])
	cmd := exec.CommandContext(ctx, bin, "run", "--user", "65534:65534", "--docker", "--docker-host", e.Host, "--allowlist", policy,
		"--audit-log", auditLog, "--", "sh", "-c", addScript)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance, "WS="+ws, "IMG="+dockertest.BaseImage, "FILEURL="+fileURL, "OUTURL="+outURL)
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
	read := func(n string) string { b, _ := os.ReadFile(filepath.Join(ws, n+".out")); return string(b) }

	if s := read("file"); !strings.HasSuffix(s, "exit=0\n") || !strings.Contains(s, content) || !strings.Contains(s, "ADD "+fileURL+" /f") {
		t.Errorf("the build with an ADD of the allowed host:\n%s\nwant it built, %s printed and the step naming %s", s, content, fileURL)
	}
	if !strings.Contains(strings.Join(allowed.requests(), "\n"), "GET /file") {
		t.Errorf("the allowed host did not serve the file: %v", allowed.requests())
	}
	s := read("out")
	t.Logf("the builds' output:\n%s\n%s", read("file"), s)
	if strings.HasSuffix(s, "exit=0\n") || !strings.Contains(s, other.Addr) {
		t.Errorf("the build whose ADD redirects off the allowed host:\n%s\nwant a failure naming %s", s, other.Addr)
	}
	if n := other.requests()[otherMark:]; len(n) != 0 {
		t.Errorf("the host the policy lacks got the session's fetch: %v", n)
	}
	found := false
	for _, ev := range world.ReadAuditLog(t, auditLog) {
		if m := fmt.Sprint(ev["message"]); ev["type"] == "docker_refused" && strings.Contains(m, other.Addr) && strings.Contains(m, "redirects") {
			found = true
		}
	}
	if !found {
		t.Errorf("no docker_refused event naming %s in the audit log", other.Addr)
	}
}
