// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Package containere2e tests sluice with the real Docker engine: the image
// that the repository's Dockerfile builds, with local base images and no
// registry. Each test starts a private dockerd (tests/dockertest) that
// leaves the host's networking alone; containers get --network none.
package containere2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
)

// TestDockerfileNeedsNoBuildKitAndNoRegistry reads the Dockerfile for what
// breaks a stock engine: a `# syntax` line fetches a frontend from a
// registry; RUN --mount, COPY --link and heredocs need BuildKit; a base
// image that is not a build argument cannot come from a local image.
func TestDockerfileNeedsNoBuildKitAndNoRegistry(t *testing.T) {
	f, err := os.Open(filepath.Join(dockertest.RepoRoot(), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buildKitOnly := regexp.MustCompile(`(?i)^\s*(RUN|COPY|ADD)\s+.*(--mount|--link|--chmod|--parents|<<)`)
	from := regexp.MustCompile(`(?i)^\s*FROM\s+(\S+)`)
	sc := bufio.NewScanner(f)
	froms := 0
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.ToLower(strings.ReplaceAll(line, " ", "")), "#syntax=") {
			t.Errorf("Dockerfile:%d: a `# syntax` line needs a registry: %s", n, line)
		}
		if buildKitOnly.MatchString(line) {
			t.Errorf("Dockerfile:%d: needs BuildKit: %s", n, line)
		}
		if m := from.FindStringSubmatch(line); m != nil {
			froms++
			if !strings.HasPrefix(m[1], "${") {
				t.Errorf("Dockerfile:%d: the base image must be a build argument: %s", n, line)
			}
		}
	}
	if froms == 0 {
		t.Fatal("Dockerfile has no FROM")
	}
	b, err := os.ReadFile(filepath.Join(dockertest.RepoRoot(), ".dockerignore"))
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	for _, want := range []string{".git", "*.exe", "bin"} {
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf(".dockerignore does not leave out %s", want)
		}
	}
}

// TestImageBuildsWithTheClassicBuilder builds the Dockerfile as a stock
// docker.io engine does by default (no BuildKit), from debootstrap images,
// with no registry and no network, and runs the result; then runs the
// daemon from it as the Dockerfile documents (daemon_test.go). One image
// build serves both: it is the slow part.
func TestImageBuildsWithTheClassicBuilder(t *testing.T) {
	e := dockertest.Start(t)
	start := time.Now()
	e.Image(t, "sluice", 10*time.Minute, "DOCKER_BUILDKIT=0")
	t.Logf("base, Go and sluice images in %v", time.Since(start).Round(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := e.Docker(ctx, "run", "--rm", "--network", "none", "--entrypoint", "sluice", dockertest.SluiceImage, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "sluice test ") {
		t.Errorf("sluice version in the image: %q, want the VERSION build argument", out)
	}
	// The entrypoint is the daemon, and its help works without privileges.
	out, err = e.Docker(ctx, "run", "--rm", "--network", "none", dockertest.SluiceImage, "--help")
	if err != nil || !strings.Contains(out, "--state-dir") {
		t.Errorf("daemon --help in the image: %v\n%s", err, out)
	}
	// The image holds the binary, the default configuration and the docs,
	// not the build context.
	out, err = e.Docker(ctx, "run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", dockertest.SluiceImage, "-c",
		"test -x /usr/local/bin/sluice && test -f /etc/sluice/sluice.json && test -f /usr/share/doc/sluice/api.md && ! test -e /src && echo ok")
	if err != nil || strings.TrimSpace(out) != "ok" {
		t.Errorf("image contents: %v %q", err, out)
	}
	t.Run("daemon container restart", func(t *testing.T) { testDaemonContainerRestart(t, e) })
}
