// SPDX-License-Identifier: Apache-2.0

//go:build linux

package criworld

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

func TestMain(m *testing.M) {
	code := func() int {
		if code, ready := needs.Main(m, "criworld", needs.Kernel...); !ready {
			return code
		}
		defer world.RemoveProbe()
		return m.Run()
	}()
	os.Exit(code)
}

// TestPodsAsAKubeletMakesThem: a pod and its container run under the
// kubelet's cgroup (the pod's own, with the sandbox and the container
// below it), in the namespace containerd runs in; an exec'd probe runs in
// the container's cgroup; the node's hook runs for containers, not for the
// sandbox, and a failing hook fails the container's start; removing the
// pod removes its cgroup.
func TestPodsAsAKubeletMakesThem(t *testing.T) {
	w := world.New(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "hook-ran")
	// The hook: a shell that records each run, and refuses containers
	// whose state names the pod "refuse-me" (the sandbox name is in the
	// state's annotations).
	script := filepath.Join(dir, "hook.sh")
	body := "#!/bin/sh\nstate=$(cat)\necho run >> " + marker + "\ncase \"$state\" in *refuse-me*) echo refused >&2; exit 1;; esac\nexit 0\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	n := StartNode(t, NodeOptions{Netns: w.ClientPath(), Hook: &Hook{Path: "/bin/sh", Args: []string{"sh", script}}})

	pod, err := n.RunPod(t, PodSpec{Name: "one", Namespace: "ns1", UID: "0d0e0f00-1111-2222-3333-444455556666"})
	if err != nil {
		t.Fatalf("%v\n%s", err, n.tail())
	}
	if b, _ := os.ReadFile(marker); len(b) != 0 {
		t.Errorf("the hook ran for the sandbox: %q", b)
	}
	cg, err := n.PodCgroup(pod)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimPrefix(PodCgroupParent("0d0e0f00-1111-2222-3333-444455556666"), "/"); cg != want {
		t.Errorf("the pod's cgroup is %q, want %q", cg, want)
	}
	ctr, err := n.CreateContainer(pod, ContainerSpec{Name: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctr); err != nil {
		t.Fatalf("%v\n%s", err, n.tail())
	}
	if b, _ := os.ReadFile(marker); strings.Count(string(b), "run") != 1 {
		t.Errorf("the hook ran %q for one container, want once", b)
	}
	pid, err := n.ContainerPID(ctr)
	if err != nil {
		t.Fatal(err)
	}
	cgroup, _ := os.ReadFile("/proc/" + itoa(pid) + "/cgroup")
	if !strings.Contains(string(cgroup), "0::/"+cg+"/") {
		t.Errorf("the container's cgroup is not below its pod's: %s", cgroup)
	}
	// The container shares the client namespace: a probe reaches a server
	// of the world there.
	port := w.ListenTCP(t, world.AllowedV4)
	out, stderr, code, err := n.Exec(ctr, "/probe", "tcp", world.AllowedV4.String(), itoa(int(port)))
	if err != nil && code < 0 {
		t.Fatalf("exec: %v (%s)", err, stderr)
	}
	r, err := world.ParseProbeResult([]byte(out))
	if err != nil || !r.OK {
		t.Errorf("the probe in the container: %v %v (stderr %q)", r, err, stderr)
	}

	refused, err := n.RunPod(t, PodSpec{Name: "refuse-me", Namespace: "ns1"})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := n.CreateContainer(refused, ContainerSpec{Name: "main"})
	if err == nil {
		err = n.Start(c2)
	}
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a container whose hook fails: %v; want the hook's error", err)
	}

	if err := n.StopPod(pod); err != nil {
		t.Fatal(err)
	}
	if err := n.RemovePod(pod); err != nil {
		t.Fatal(err)
	}
	if m, err := cgroupV2Mount(); err == nil {
		if _, err := os.Stat(filepath.Join(m, cg)); !os.IsNotExist(err) {
			t.Errorf("the removed pod's cgroup is still there: %v", err)
		}
	}
}

func cgroupV2Mount() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if pre, post, ok := strings.Cut(l, " - "); ok && strings.HasPrefix(post, "cgroup2 ") {
			if f := strings.Fields(pre); len(f) > 4 {
				return f[4], nil
			}
		}
	}
	return "", os.ErrNotExist
}

func itoa(i int) string { return strconv.Itoa(i) }
