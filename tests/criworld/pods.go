// SPDX-License-Identifier: Apache-2.0

//go:build linux

package criworld

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// PodSpec is what a kubelet puts in a pod's CRI sandbox config.
type PodSpec struct {
	Name, Namespace string
	UID             string // "": a random one
	Annotations     map[string]string
	Labels          map[string]string
	// OwnNetwork gives the pod its own network namespace through the
	// node's CNI network (NodeOptions.PodCIDR), as most Kubernetes pods
	// have; false: the host network of containerd's namespace.
	OwnNetwork bool
}

// podInfo is what the node keeps of a pod it ran.
type podInfo struct {
	config     string // its sandbox config file, for crictl create
	ownNetwork bool
}

// ContainerSpec is what a kubelet puts in a container's CRI config.
type ContainerSpec struct {
	Name        string
	Image       string   // "": TestImage
	Command     []string // "": /pause
	Args        []string
	Env         map[string]string
	Annotations map[string]string
	Labels      map[string]string
}

// PodCgroupParent is the cgroup parent the kubelet's cgroupfs driver
// gives a BestEffort pod.
func PodCgroupParent(uid string) string { return "/kubepods/besteffort/pod" + uid }

// CRI's NamespaceMode: POD, a namespace of the pod's own (its containers
// share it); NODE, the host's (containerd's).
const (
	namespacePod  = 0
	namespaceNode = 2
)

// networkMode is the CRI network mode of a pod, and so of its containers.
func networkMode(own bool) int {
	if own {
		return namespacePod
	}
	return namespaceNode
}

// RunPod runs a pod sandbox (crictl runp) with the host network, or its
// own through CNI (p.OwnNetwork), in the kubelet's cgroup layout, and
// returns its id.
func (n *Node) RunPod(t testing.TB, p PodSpec) (string, error) {
	t.Helper()
	if p.OwnNetwork && n.CNINetwork == "" {
		return "", fmt.Errorf("run pod %s/%s: its own network needs a node with a pod network (NodeOptions.PodCIDR)", p.Namespace, p.Name)
	}
	if p.UID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		h := hex.EncodeToString(b[:])
		p.UID = h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	}
	if p.Namespace == "" {
		p.Namespace = "default"
	}
	n.seq++
	cfg := map[string]any{
		"metadata":      map[string]any{"name": p.Name, "namespace": p.Namespace, "uid": p.UID, "attempt": 0},
		"log_directory": filepath.Join(n.Dir, "logs", p.UID),
		"annotations":   p.Annotations,
		"labels":        p.Labels,
		"linux": map[string]any{
			"cgroup_parent":    PodCgroupParent(p.UID),
			"security_context": map[string]any{"namespace_options": map[string]any{"network": networkMode(p.OwnNetwork)}},
		},
	}
	path := filepath.Join(n.Dir, fmt.Sprintf("pod-%d.json", n.seq))
	if err := writeJSON(path, cfg); err != nil {
		return "", err
	}
	// The kubelet removes the pod's cgroup once the pod is gone; so does
	// the node's cleanup.
	n.uids = append(n.uids, p.UID)
	out, err := n.crictl("runp", path)
	if err != nil {
		return "", fmt.Errorf("run pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	id := strings.TrimSpace(out)
	n.pods[id] = podInfo{config: path, ownNetwork: p.OwnNetwork}
	return id, nil
}

// CreateContainer creates a container in a pod (crictl create) and returns
// its id; the error is the runtime's (an NRI plugin's refusal among them).
func (n *Node) CreateContainer(podID string, c ContainerSpec) (string, error) {
	pod, ok := n.pods[podID]
	if !ok {
		return "", fmt.Errorf("no pod %s on this node", podID)
	}
	if c.Image == "" {
		c.Image = TestImage
	}
	if len(c.Command) == 0 {
		c.Command = []string{"/pause"}
	}
	var envs []map[string]string
	for k, v := range c.Env {
		envs = append(envs, map[string]string{"key": k, "value": v})
	}
	n.seq++
	cfg := map[string]any{
		"metadata":    map[string]any{"name": c.Name, "attempt": 0},
		"image":       map[string]any{"image": c.Image},
		"command":     c.Command,
		"args":        c.Args,
		"envs":        envs,
		"annotations": c.Annotations,
		"labels":      c.Labels,
		"log_path":    fmt.Sprintf("%s-%d.log", c.Name, n.seq),
		"linux": map[string]any{
			// A container shares its pod's network, as a kubelet asks.
			"security_context": map[string]any{"namespace_options": map[string]any{"network": networkMode(pod.ownNetwork)}},
		},
	}
	path := filepath.Join(n.Dir, fmt.Sprintf("ctr-%d.json", n.seq))
	if err := writeJSON(path, cfg); err != nil {
		return "", err
	}
	out, err := n.crictl("create", podID, path, pod.config)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", c.Name, err)
	}
	return strings.TrimSpace(out), nil
}

// Start starts a created container (crictl start): the runtime's OCI hooks
// run here.
func (n *Node) Start(ctr string) error {
	if _, err := n.crictl("start", ctr); err != nil {
		return fmt.Errorf("start container: %w", err)
	}
	return nil
}

// Exec runs argv in a running container (ctr tasks exec) and returns its
// output and exit code; code is -1 when it could not run at all.
func (n *Node) Exec(ctr string, argv ...string) (stdout, stderr string, code int, err error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	cmd := exec.Command(n.Bins.Ctr, append([]string{"--address", n.Socket, "--namespace", "k8s.io", "tasks", "exec",
		"--exec-id", "exec-" + hex.EncodeToString(b[:]), ctr}, argv...)...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		return "", "", -1, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		err = fmt.Errorf("exec %v: no answer within 60 s", argv)
		<-done
		return so.String(), se.String(), -1, err
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return so.String(), se.String(), 0, nil
	case errors.As(err, &ee):
		return so.String(), se.String(), ee.ExitCode(), err
	default:
		return so.String(), se.String(), -1, err
	}
}

// StopPod stops a pod's sandbox and containers (crictl stopp).
func (n *Node) StopPod(podID string) error {
	_, err := n.crictl("stopp", podID)
	return err
}

// RemovePod removes a stopped pod (crictl rmp) and, as the kubelet does,
// its cgroup.
func (n *Node) RemovePod(podID string) error {
	out, _ := n.crictl("inspectp", podID)
	if _, err := n.crictl("rmp", "-f", podID); err != nil {
		return err
	}
	var st struct {
		Status struct {
			Metadata struct {
				UID string `json:"uid"`
			} `json:"metadata"`
		} `json:"status"`
	}
	if json.Unmarshal([]byte(out), &st) == nil && st.Status.Metadata.UID != "" {
		removePodCgroups(PodCgroupParent(st.Status.Metadata.UID))
	}
	delete(n.pods, podID)
	return nil
}

// ContainerPID is the pid of a running container's init process.
func (n *Node) ContainerPID(ctr string) (int, error) { return n.pidOf("inspect", ctr) }

// SandboxPID is the pid of a pod's pause process.
func (n *Node) SandboxPID(podID string) (int, error) { return n.pidOf("inspectp", podID) }

func (n *Node) pidOf(verb, id string) (int, error) {
	out, err := n.crictl(verb, "-o", "json", id)
	if err != nil {
		return 0, err
	}
	var st struct {
		Info struct {
			Pid int `json:"pid"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return 0, fmt.Errorf("crictl %s %s: %w", verb, id, err)
	}
	if st.Info.Pid <= 0 {
		return 0, fmt.Errorf("crictl %s %s: no pid", verb, id)
	}
	return st.Info.Pid, nil
}

// PodCgroup is a pod's cgroup below the cgroup2 mount (the parent of its
// sandbox's), read off the pause process's /proc/PID/cgroup.
func (n *Node) PodCgroup(podID string) (string, error) {
	pid, err := n.SandboxPID(podID)
	if err != nil {
		return "", err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "0::"); ok {
			return strings.TrimPrefix(filepath.Dir(rest), "/"), nil
		}
	}
	return "", fmt.Errorf("pid %d has no cgroup2 line", pid)
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
