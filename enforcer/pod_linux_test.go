// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/cgroups"
)

// TestAttachPodConfinesItsContainers: a pod's cgroup made outside sluice's
// root (as the kubelet makes /kubepods/...) is confined where it is. Its
// container cgroups, made before the attach and after it, reach the
// policy's addresses and are refused others with EPERM. An agent that
// stops without closing leaves the pod confined and a new one attaches it
// again. Close detaches, leaves the cgroup, and the pod is free again
// (the twin: the same connects before the attach and after the Close are
// not refused). The clients run in a network namespace holding only
// loopback: an allowed connect ends in "Network is unreachable", never on
// a wire.
func TestAttachPodConfinesItsContainers(t *testing.T) {
	e := testEnforcer(t, "sluice-pod")
	mount, err := cgroups.Mount()
	if err != nil {
		t.Fatal(err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	top := "sluice-test-kubepods-" + hex.EncodeToString(rnd[:])
	rel := top + "/besteffort/pod0b0e5f4e-1d2c-4e7a-9a11-" + hex.EncodeToString(rnd[:]) + "0000"
	podDir := filepath.Join(mount, rel)
	early := filepath.Join(podDir, "early-container")
	if err := os.MkdirAll(early, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range []string{filepath.Join(podDir, "late-container"), early, podDir, filepath.Dir(podDir), filepath.Join(mount, top)} {
			_ = os.Remove(d)
		}
	})
	run := func(dir, script string) string {
		t.Helper()
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		cmd := exec.Command("unshare", "-n", "bash", "-c", "ip link set lo up; "+script)
		cmd.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	const allowed, denied = "exec 3<>/dev/tcp/203.0.113.7/9", "exec 3<>/dev/tcp/203.0.113.200/9"
	expect := func(what, dir, script, want string) {
		t.Helper()
		if out := run(dir, script); !strings.Contains(out, want) {
			t.Errorf("%s: %q, want %q", what, out, want)
		}
	}
	// The twin: unconfined, the denied connect reaches the routing.
	expect("before the attach, the denied address", early, denied, "Network is unreachable")

	p, err := allowlist.Parse([]byte(`{"allowed_hosts": ["203.0.113.0/25"]}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.AttachPod(rel, Options{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	if s.Name() != filepath.Base(rel) {
		t.Errorf("session name %q, want the pod cgroup's %q", s.Name(), filepath.Base(rel))
	}
	late := filepath.Join(podDir, "late-container")
	if err := os.Mkdir(late, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{early, late} {
		expect(filepath.Base(dir)+", the allowed address", dir, allowed, "Network is unreachable")
		expect(filepath.Base(dir)+", a denied address", dir, denied, "Operation not permitted")
	}
	if ids, _ := e.Datapath().AttachedAt(); !slices.Contains(ids, s.ID()) {
		t.Errorf("AttachedAt = %v, want the pod's cgroup %d", ids, s.ID())
	}

	// The agent dies: its handles and lock go, nothing is closed.
	s.lock.Close()
	s.closed = true
	closed = true
	cfg := e.cfg
	_ = e.Close()
	expect("with no agent, a denied address", late, denied, "Operation not permitted")
	e2, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	s2, err := e2.AttachPod(rel, Options{Policy: p})
	if err != nil {
		t.Fatalf("attach again after the agent's restart: %v", err)
	}
	expect("attached again, a denied address", late, denied, "Operation not permitted")
	expect("attached again, the allowed address", late, allowed, "Network is unreachable")

	// A pod that is still running when its session closes stays refused.
	sleep := exec.Command("sleep", "30")
	fd, err := unix.Open(late, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sleep.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	err = sleep.Start()
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Errorf("close with a live process: %v", err)
	}
	expect("closed while running, the allowed address", early, allowed, "Operation not permitted")
	_ = sleep.Process.Kill()
	_ = sleep.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if pop, _ := s2.cg.Populated(); !pop || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := e2.ReclaimPods(); err != nil {
		t.Errorf("reclaim: %v", err)
	}
	// The cgroup exists still (the kubelet's), so its links stay until the
	// pod's end: remove the pod as the kubelet would, and reclaim.
	if ids, _ := e2.Datapath().AttachedAt(); !slices.Contains(ids, s2.ID()) {
		t.Errorf("reclaim detached a live cgroup's links: %v", ids)
	}
	for _, d := range []string{late, early, podDir} {
		if err := os.Remove(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := e2.ReclaimPods(); err != nil {
		t.Errorf("reclaim: %v", err)
	}
	if ids, _ := e2.Datapath().AttachedAt(); slices.Contains(ids, s2.ID()) {
		t.Errorf("links of a removed pod cgroup stay after reclaim: %v", ids)
	}
	if al, _ := e2.Datapath().Aliases(); len(al) != 0 {
		t.Errorf("aliases after the pod's end: %v", al)
	}
}

// TestPodCloseFreesAnEmptyPod: Close of a pod session whose cgroup is
// empty detaches at once and the cgroup stays (the kubelet's); the root
// of the hierarchy is no pod.
func TestPodCloseFreesAnEmptyPod(t *testing.T) {
	e := testEnforcer(t, "sluice-pod")
	mount, err := cgroups.Mount()
	if err != nil {
		t.Fatal(err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	rel := "sluice-test-kubepods-" + hex.EncodeToString(rnd[:]) + "/pod1"
	dir := filepath.Join(mount, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dir); _ = os.Remove(filepath.Dir(dir)) })
	s, err := e.AttachPod(rel, Options{Policy: nil})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the pod's cgroup after Close: %v", err)
	}
	if ids, _ := e.Datapath().AttachedAt(); len(ids) != 0 {
		t.Errorf("AttachedAt after Close = %v", ids)
	}
	if _, err := e.AttachPod("/", Options{}); err == nil {
		t.Error("AttachPod of the hierarchy's root succeeded")
	}
}
