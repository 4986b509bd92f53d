// SPDX-License-Identifier: Apache-2.0

//go:build linux

package criworld

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

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

// TestPodWithItsOwnNetwork: a pod with its own network namespace, as most
// Kubernetes pods have, wired by CNI (ptp, host-local) to the namespace
// containerd runs in: its container is in the pod's namespace, not the
// client's; a probe exec'd there reaches a world server, which sees the
// pod's own address (routed, not masqueraded); removing the pod releases
// its veth, its pinned namespace, its address and libcni's cache entry.
func TestPodWithItsOwnNetwork(t *testing.T) {
	w := world.New(t)
	cidr := netip.MustParsePrefix("198.51.100.128/25")
	if err := w.RouteToClient(cidr); err != nil {
		t.Fatal(err)
	}
	n := StartNode(t, NodeOptions{Netns: w.ClientPath(), PodCIDR: cidr.String()})
	before := clientVeths(t, w)

	pod, err := n.RunPod(t, PodSpec{Name: "own", Namespace: "ns1", OwnNetwork: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, n.tail())
	}
	ip, err := n.PodIP(pod)
	if err != nil {
		t.Fatal(err)
	}
	// The CIDR's first address is the gateway on the host ends.
	if !cidr.Contains(ip) || ip == cidr.Addr().Next() || ip == cidr.Addr() {
		t.Errorf("the pod's IP %v is not a pod address of %v", ip, cidr)
	}
	if got := clientVeths(t, w); len(got) != len(before)+1 {
		t.Errorf("veths in the client namespace with the pod: %v, before %v; want one more", got, before)
	}
	if m := n.NetnsMounts(); len(m) != 1 {
		t.Errorf("pinned pod namespaces below the node: %v, want one", m)
	}
	ctr, err := n.CreateContainer(pod, ContainerSpec{Name: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctr); err != nil {
		t.Fatalf("%v\n%s", err, n.tail())
	}
	pid, err := n.ContainerPID(ctr)
	if err != nil {
		t.Fatal(err)
	}
	podNS, err := n.PodNetns(pod)
	if err != nil {
		t.Fatal(err)
	}
	if same(t, "/proc/"+itoa(pid)+"/ns/net", w.ClientPath()) {
		t.Errorf("the container runs in the client namespace, not its pod's")
	}
	if !same(t, "/proc/"+itoa(pid)+"/ns/net", podNS) {
		t.Errorf("the container is not in its pod's network namespace %s", podNS)
	}

	port := w.ListenTCP(t, world.AllowedV4)
	out, stderr, code, err := n.Exec(ctr, "/probe", "tcp", world.AllowedV4.String(), itoa(int(port)))
	if err != nil && code < 0 {
		t.Fatalf("exec: %v (%s)", err, stderr)
	}
	r, err := world.ParseProbeResult([]byte(out))
	if err != nil || !r.OK {
		t.Errorf("the probe in the pod: %v %v (stderr %q)", r, err, stderr)
	}
	var from []netip.AddrPort
	for _, c := range w.Contacts() {
		if c.Local.Port() == port {
			from = append(from, c.Remote)
		}
	}
	if len(from) != 1 || from[0].Addr() != ip {
		t.Errorf("the world's server saw %v, want one connection from the pod's %v", from, ip)
	}

	if err := n.StopPod(pod); err != nil {
		t.Fatal(err)
	}
	if err := n.RemovePod(pod); err != nil {
		t.Fatal(err)
	}
	if got := clientVeths(t, w); len(got) != len(before) {
		t.Errorf("veths in the client namespace after the pod: %v, before %v", got, before)
	}
	if m := n.NetnsMounts(); len(m) != 0 {
		t.Errorf("pinned pod namespaces left below the node: %v", m)
	}
	if f := n.CNICacheFiles(); len(f) != 0 {
		t.Errorf("libcni's cache still holds the pod: %v", f)
	}
	// host-local keeps one file per address in use, named by it.
	if _, err := os.Stat(filepath.Join(n.Dir, "cni/ipam", n.CNINetwork, ip.String())); !os.IsNotExist(err) {
		t.Errorf("the pod's address %v is still allocated: %v", ip, err)
	}
}

// clientVeths are the names of the veths in the client namespace.
func clientVeths(t *testing.T, w *world.World) []string {
	t.Helper()
	var names []string
	if err := w.InClient(func() error {
		links, err := netlink.LinkList()
		for _, l := range links {
			if l.Type() == "veth" {
				names = append(names, l.Attrs().Name)
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return names
}

// same reports whether two namespace files are the same namespace.
func same(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(fa, fb)
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
