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

// TestMisplacedContainersRefused gives containers the wrong cgroup parent
// and checks that none runs unconfined without a word. The other form of
// the root's name (here, a cgroupfs host: the slice name) is fenced: the
// engine cannot create the container's cgroup, `docker run` fails, and the
// container's first instruction, a connect to a world host, never runs
// (the world records nothing); the same container in an unfenced parent
// of the same kind reaches the host (the twin). A container labelled
// sluice.policy under a mistyped parent is frozen and reported, in the
// audit log, the daemon's log and `sluice check`.
func TestMisplacedContainersRefused(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	w := world.New(t)
	hosts := newHosts(t, w, map[string]string{"target.test": "203.0.113.51"})
	h := hosts["target.test"]
	pd := startPolicyDaemon(t, w, []string{"target.test"}, map[string][]string{"dev": {"target.test"}})
	probe := world.BuildProbe(t)
	out := t.TempDir()
	_ = os.Chmod(out, 0o777)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fence := strings.ReplaceAll(pd.instance, "-", "_") + ".slice"
	twinParent := strings.ReplaceAll(pd.instance, "-", "_") + "_twin.slice"
	typo := strings.Replace(pd.instance, "sluice", "sluce", 1)
	t.Cleanup(func() {
		// The engine made these parents in every hierarchy; the fence is
		// sluice cleanup's. (Registered before the containers' removal,
		// so it runs after it.)
		for _, dir := range v1Parents(t, fence) {
			_ = os.Remove(dir)
		}
		for _, name := range []string{twinParent, typo} {
			for _, dir := range append(v1Parents(t, name), cgroupRoot(t, name)) {
				_ = os.Remove(dir)
			}
		}
	})
	removeAtCleanup(t, e, "pod", "fenced", "twin", "typo")
	if _, err := e.Docker(ctx, "run", "-d", "--name", "pod", "--network", "none", dockertest.BaseImage, "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	moveClientLink(t, w, containerPid(t, e, "pod"))
	run := func(name, parent string, extra ...string) (string, error) {
		// Written whole, then renamed: the test waits for the name.
		first := fmt.Sprintf("probe tcp %s %d > /out/%[3]s.tmp; mv /out/%[3]s.tmp /out/%[3]s.json; exec sleep 600", h.addr, h.port, name)
		args := append([]string{"run", "-d", "--name", name, "--network", "container:pod", "--cgroup-parent", parent,
			"-v", probe + ":/usr/local/bin/probe:ro", "-v", out + ":/out"}, extra...)
		return e.Docker(ctx, append(args, dockertest.BaseImage, "sh", "-c", first)...)
	}

	// The twin: an ordinary parent; its first instruction reaches the host.
	mark := time.Now()
	if o, err := run("twin", twinParent); err != nil {
		t.Fatalf("the twin did not start: %v %s", err, o)
	}
	waitPath(t, filepath.Join(out, "twin.json"))
	if r := readProbe(t, filepath.Join(out, "twin.json")); !r.OK {
		t.Fatalf("the twin (parent %s) did not reach the host: %s", twinParent, r)
	}
	if !w.WaitArrival(world.All(world.To(h.addr), world.Since(mark)), 5*time.Second) {
		t.Fatal("the twin: the world recorded nothing")
	}

	// The fenced form: docker run fails; nothing ran; the daemon says so.
	mark = time.Now()
	o, err := run("fenced", fence)
	if err == nil {
		t.Fatalf("a container with --cgroup-parent=%s (the fenced form) started: %s", fence, o)
	}
	t.Logf("docker run --cgroup-parent=%s: %v", fence, err)
	waitAuditMatch(t, pd.audit, "a session_refused line for the fenced container", func(e map[string]any) bool {
		return e["type"] == "session_refused" && strings.Contains(fmt.Sprint(e["message"]), "the other form of sluice's root") &&
			strings.Contains(fmt.Sprint(e["message"]), "--cgroup-parent=/"+pd.instance)
	})
	w.AssertNothingArrived(t, world.All(world.To(h.addr), world.Since(mark)), 500*time.Millisecond)
	if _, err := os.Stat(filepath.Join(out, "fenced.json")); err == nil {
		t.Error("the fenced container's first instruction ran")
	}

	// A labelled container under a mistyped parent: frozen, reported.
	id, err := run("typo", "/"+typo, "--label", "sluice.policy=dev")
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimSpace(id)
	freeze := filepath.Join(cgroupRoot(t, typo), id, "cgroup.freeze")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, _ := os.ReadFile(freeze); strings.TrimSpace(string(b)) == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the labelled container under /%s was not frozen within 20 s", typo)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitAuditMatch(t, pd.audit, "a session_refused line naming the misplaced container", func(e map[string]any) bool {
		return e["type"] == "session_refused" && e["session"] == id && strings.Contains(fmt.Sprint(e["message"]), "--cgroup-parent=/"+pd.instance)
	})
	if !strings.Contains(pd.log.String(), "container "+id[:12]+" refused") {
		t.Errorf("the daemon's log does not name the misplaced container:\n%s", pd.log.String())
	}
	c := pd.command("check")
	o2, _ := c.CombinedOutput()
	if !strings.Contains(string(o2), "misplaced containers") || !strings.Contains(string(o2), id[:12]) {
		t.Errorf("sluice check does not name the misplaced container:\n%s", o2)
	}
}
