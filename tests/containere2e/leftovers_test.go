// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
)

// TestDockerLeftoversOfAKilledSession: a `sluice run --docker` killed
// with SIGKILL cannot end its session, and its container, network and
// volume stay on the engine (the twin: they are still there after the
// kill). The next `sluice run --docker` of the same root removes them,
// says so on its terminal, and leaves alone a container that is not a
// session's.
func TestDockerLeftoversOfAKilledSession(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	bin, instance := embeddedSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := e.Docker(ctx, "run", "-d", "--name", "plain", "--network", "none", dockertest.BaseImage, "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	ws := sessionWorkspace(t, bin)
	run := func(script string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.CommandContext(ctx, bin, "run", "--user", "65534:65534", "--docker", "--docker-host", e.Host, "--", "sh", "-c", script)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance, "WS="+ws, "IMG="+dockertest.BaseImage,
			"HOME="+ws, "DOCKER_CONFIG="+filepath.Join(ws, ".docker"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.WaitDelay = 10 * time.Second
		return cmd, &out
	}
	first, firstOut := run(`docker run -d --name left --network none "$IMG" sleep 600 > left.out 2>&1 &&
docker network create leftnet >> left.out 2>&1 && docker volume create leftvol >> left.out 2>&1 && touch "$WS/started"; sleep 600`)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(ws, "left.out"))
			_ = first.Process.Kill()
			t.Fatalf("the first session did not make its container, network and volume:\n%s\n%s", firstOut.String(), b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	has := func(args ...string) bool {
		got, err := e.Docker(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(got) != ""
	}
	left := func() (c, n, v bool) {
		return has("ps", "-aq", "--filter", "name=^left$"), has("network", "ls", "-q", "--filter", "name=^leftnet$"),
			has("volume", "ls", "-q", "--filter", "name=^leftvol$")
	}
	time.Sleep(time.Second)
	if c, n, v := left(); !c || !n || !v {
		t.Fatalf("after the kill: container %v, network %v, volume %v: want all three left (nothing can remove them)", c, n, v)
	}

	second, secondOut := run(`i=0; while [ ! -e "$WS/swept" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done`)
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(40 * time.Second)
	for {
		c, n, v := left()
		if !c && !n && !v {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("40 s into the next session: container %v, network %v, volume %v still there", c, n, v)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = os.WriteFile(filepath.Join(ws, "swept"), nil, 0o644)
	if err := second.Wait(); err != nil {
		t.Errorf("the second session: %v\n%s", err, secondOut.String())
	}
	t.Logf("the second session:\n%s", secondOut.String())
	for _, kind := range []string{"container", "network", "volume"} {
		if !strings.Contains(secondOut.String(), "docker: removed "+kind) {
			t.Errorf("the second session's terminal does not say it removed the %s", kind)
		}
	}
	if !has("ps", "-q", "--filter", "name=^plain$") {
		t.Error("a container that is no session's was removed")
	}
}
