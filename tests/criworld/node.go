// SPDX-License-Identifier: Apache-2.0

//go:build linux

package criworld

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// Hook is an OCI hook the node puts in every container's spec through
// containerd's base_runtime_spec, as a node's admin would.
type Hook struct {
	Path    string
	Args    []string // argv, [0] included
	Env     []string
	Timeout int    // seconds; 0: 10
	Stage   string // OCI hook stage; "": createRuntime
}

// NodeOptions configure StartNode.
type NodeOptions struct {
	// Netns is the network namespace file containerd runs in (and so
	// every host-network pod); "": this process's.
	Netns string
	// NRISocket is where containerd's NRI listens; "": Dir/nri.sock.
	NRISocket string
	// Hook, when set, is in every container's spec.
	Hook *Hook
	// Snapshotter is the CRI plugin's; "": overlayfs.
	Snapshotter string
	// PodAnnotations are the pod annotations (patterns) containerd copies
	// into its containers' OCI specs.
	PodAnnotations []string
	// ImageFiles are added to the test image beside /pause and /probe.
	ImageFiles []ImageFile
	// PodCIDR, e.g. "198.51.100.128/25", gives the node a pod network
	// through CNI (ptp and host-local), for pods with their own network
	// namespace (PodSpec.OwnNetwork): the pods' veths end in Netns, which
	// must be set, their default route is the CIDR's first address there.
	// For replies from the world, route the CIDR back to the client
	// (world.RouteToClient). "": no pod network, host-network pods only.
	PodCIDR string
}

// Node is one running containerd with its CRI plugin.
type Node struct {
	Bins      Bins
	Dir       string
	Socket    string
	NRISocket string
	NetnsPath string
	Config    string
	BaseSpec  string // "" without a hook
	Log       string
	PID       int
	// PodCIDR is the pod network's range; invalid without one.
	PodCIDR netip.Prefix
	// CNINetwork is the pod network's name, unique to the node; "":
	// none.
	CNINetwork string

	t       testing.TB
	cmd     *exec.Cmd
	exited  chan struct{}
	crictlC string
	pods    map[string]podInfo
	// cniMadeDirs are libcni's cache directories that were missing when
	// the node started, for its cleanup to remove when empty.
	cniMadeDirs []string
	uids        []string // pod uids whose cgroups the node removes
	seq         int
}

// StartTimeout bounds containerd's start and the image's import.
const StartTimeout = 60 * time.Second

// StartNode starts a containerd with the CRI plugin and NRI, imports the
// test image, and registers its cleanup (pods, shims, mounts, cgroups,
// directory) with t.
func StartNode(t testing.TB, o NodeOptions) *Node {
	t.Helper()
	bins := Tools(t)
	// A short directory: unix socket paths have 108 bytes.
	dir, err := os.MkdirTemp("/tmp", "criworld-")
	if err != nil {
		t.Fatalf("criworld: %v", err)
	}
	n := &Node{Bins: bins, Dir: dir, Socket: filepath.Join(dir, "containerd.sock"), NRISocket: o.NRISocket,
		NetnsPath: o.Netns, Config: filepath.Join(dir, "config.toml"), Log: filepath.Join(dir, "containerd.log"),
		t: t, pods: map[string]podInfo{}}
	if n.NRISocket == "" {
		n.NRISocket = filepath.Join(dir, "nri.sock")
	}
	t.Cleanup(n.cleanup)
	for _, d := range []string{"root", "state", "opt", "runc", "cni/bin", "cni/net.d", "cni/ipam", "nri/plugins", "nri/conf.d", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatalf("criworld: %v", err)
		}
	}
	if o.PodCIDR != "" {
		if n.PodCIDR, err = podNetwork(o); err != nil {
			t.Fatalf("criworld: %v", err)
		}
		n.CNINetwork = filepath.Base(dir)
		n.cniMadeDirs = missingCNICacheDirs()
		// Before containerd starts, so its CRI finds the network ready.
		if err := n.writeCNI(); err != nil {
			t.Fatalf("criworld: %v", err)
		}
	}
	pause, err := buildPause(dir)
	if err != nil {
		t.Fatalf("criworld: %v", err)
	}
	files := append([]ImageFile{{Path: "/pause", From: pause}, {Path: "/probe", From: world.BuildProbe(t)}}, o.ImageFiles...)
	image, err := buildImage(dir, files)
	if err != nil {
		t.Fatalf("criworld: %v", err)
	}
	if o.Hook != nil {
		n.BaseSpec = filepath.Join(dir, "base-spec.json")
		if err := n.writeBaseSpec(*o.Hook); err != nil {
			t.Fatalf("criworld: %v", err)
		}
	}
	snap := o.Snapshotter
	if snap == "" {
		snap = "overlayfs"
	}
	if err := os.WriteFile(n.Config, []byte(configTOML(dir, n.Socket, n.NRISocket, bins.Runc, snap, n.BaseSpec, o.PodAnnotations)), 0o644); err != nil {
		t.Fatalf("criworld: %v", err)
	}
	n.crictlC = filepath.Join(dir, "crictl.yaml")
	crictl := fmt.Sprintf("runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 30\n", n.Socket, n.Socket)
	if err := os.WriteFile(n.crictlC, []byte(crictl), 0o644); err != nil {
		t.Fatalf("criworld: %v", err)
	}
	if err := n.start(); err != nil {
		t.Fatalf("criworld: %v", err)
	}
	if out, err := n.ctr("images", "import", "--snapshotter", snap, image); err != nil {
		t.Fatalf("criworld: import the test image: %v: %s", err, out)
	}
	return n
}

// start runs containerd and waits until its CRI service answers.
func (n *Node) start() error {
	logf, err := os.OpenFile(n.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{n.Bins.Containerd, "--config", n.Config}
	if n.NetnsPath != "" {
		args = append([]string{"nsenter", "--net=" + n.NetnsPath, "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	// containerd finds its shim in PATH.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(n.Bins.Shim)+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	n.cmd, n.PID, n.exited = cmd, cmd.Process.Pid, make(chan struct{})
	go func() { _ = cmd.Wait(); close(n.exited) }()
	deadline := time.Now().Add(StartTimeout)
	for {
		if _, err := n.crictl("info"); err == nil {
			return nil
		}
		select {
		case <-n.exited:
			return fmt.Errorf("containerd exited at its start: %s", n.tail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd's CRI did not answer within %v: %s", StartTimeout, n.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Restart stops containerd (SIGTERM, as systemd does) and starts it
// again; the shims, and so the pods, keep running.
func (n *Node) Restart() error {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(20 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
	return n.start()
}

// tail is the end of containerd's log, for errors.
func (n *Node) tail() string {
	b, _ := os.ReadFile(n.Log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// writeBaseSpec writes containerd's default OCI spec with h as a hook.
func (n *Node) writeBaseSpec(h Hook) error {
	out, err := exec.Command(n.Bins.Ctr, "oci", "spec").Output()
	if err != nil {
		return fmt.Errorf("ctr oci spec: %w", err)
	}
	var spec map[string]any
	if err := json.Unmarshal(out, &spec); err != nil {
		return fmt.Errorf("ctr oci spec: %w", err)
	}
	stage := h.Stage
	if stage == "" {
		stage = "createRuntime"
	}
	timeout := h.Timeout
	if timeout == 0 {
		timeout = 10
	}
	hook := map[string]any{"path": h.Path, "args": h.Args, "timeout": timeout}
	if len(h.Env) > 0 {
		hook["env"] = h.Env
	}
	spec["hooks"] = map[string]any{stage: []any{hook}}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(n.BaseSpec, b, 0o644)
}

// run runs a tool, bounded, and returns its standard output; the error
// holds its standard error.
func run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (n *Node) crictl(args ...string) (string, error) {
	return run(60*time.Second, n.Bins.Crictl, append([]string{"--config", n.crictlC}, args...)...)
}

func (n *Node) ctr(args ...string) (string, error) {
	return run(60*time.Second, n.Bins.Ctr, append([]string{"--address", n.Socket, "--namespace", "k8s.io"}, args...)...)
}

// cleanup removes what the node made: pods (containerd still runs, so
// CNI DEL releases their veths and addresses), containerd, its shims and
// their processes, mounts below its directory (the pods' network
// namespaces among them), the pods' cgroups, libcni's cache of its
// network, the directory.
func (n *Node) cleanup() {
	if n.cmd != nil {
		if out, err := n.crictl("pods", "-q"); err == nil {
			for _, id := range strings.Fields(out) {
				_, _ = n.crictl("stopp", id)
				_, _ = n.crictl("rmp", "-f", id)
			}
		}
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.exited:
		case <-time.After(10 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
	}
	n.killShims()
	for _, uid := range n.uids {
		removePodCgroups(PodCgroupParent(uid))
	}
	unmountBelow(n.Dir)
	n.removeCNICache()
	if err := os.RemoveAll(n.Dir); err != nil {
		n.t.Errorf("criworld: remove %s: %v", n.Dir, err)
	}
}

// killShims kills the shims of this node's containerd (they outlive it)
// and whatever still runs in their containers.
func (n *Node) killShims() {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if exe != n.Bins.Shim {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !bytes.Contains(cmdline, []byte(n.Socket)) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// cgroupMounts are this machine's cgroup hierarchies (v1 and v2).
func cgroupMounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		pre, post, ok := strings.Cut(s.Text(), " - ")
		fields := strings.Fields(pre)
		if !ok || len(fields) < 5 {
			continue
		}
		if fs := strings.Fields(post); len(fs) > 0 && (fs[0] == "cgroup" || fs[0] == "cgroup2") {
			out = append(out, fields[4])
		}
	}
	return out
}

// removePodCgroups removes a pod's cgroup in every hierarchy, as the
// kubelet does once a pod is gone, killing what still runs in it, then the
// kubelet's parents where empty.
func removePodCgroups(parent string) {
	for _, m := range cgroupMounts() {
		pod := filepath.Join(m, parent)
		if _, err := os.Stat(pod); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(pod, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			for i := 0; i < 50; i++ {
				if procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs")); len(bytes.TrimSpace(procs)) > 0 {
					for _, p := range strings.Fields(string(procs)) {
						if pid, err := strconv.Atoi(p); err == nil {
							_ = syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
				if err := syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		for d := filepath.Dir(pod); d != m && strings.HasPrefix(d, m); d = filepath.Dir(d) {
			if syscall.Rmdir(d) != nil {
				break
			}
		}
	}
}

// unmountBelow detaches every mount below dir, deepest first.
func unmountBelow(dir string) {
	for i := 0; i < 3; i++ {
		f, err := os.Open("/proc/self/mountinfo")
		if err != nil {
			return
		}
		var mounts []string
		s := bufio.NewScanner(f)
		for s.Scan() {
			if fields := strings.Fields(s.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
				mounts = append(mounts, fields[4])
			}
		}
		f.Close()
		if len(mounts) == 0 {
			return
		}
		sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
		for _, m := range mounts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
}
