// SPDX-License-Identifier: Apache-2.0

//go:build linux

package criworld

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/tests/world"
)

// cniCacheDir is where libcni, inside containerd, keeps each attachment's
// result until its DEL. containerd offers no setting for it, so a node
// names its network uniquely and its cleanup removes its own files there
// (a DEL that never ran leaves them), and the directories themselves when
// they were not there before the node and are empty.
const cniCacheDir = "/var/lib/cni/results"

// cniCacheDirs are cniCacheDir and its parents libcni creates, deepest
// first.
var cniCacheDirs = []string{cniCacheDir, "/var/lib/cni"}

// missingCNICacheDirs are those of cniCacheDirs not there now.
func missingCNICacheDirs() []string {
	var out []string
	for _, d := range cniCacheDirs {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			out = append(out, d)
		}
	}
	return out
}

// podNetwork checks a node's pod network options: the pods' addresses must
// be the test's own (world.Safe throughout) and their host ends must be in
// a namespace of the test, never this machine's.
func podNetwork(o NodeOptions) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(o.PodCIDR)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("pod CIDR: %w", err)
	}
	p = p.Masked()
	if !p.Addr().Is4() || p.Bits() > 29 {
		return netip.Prefix{}, fmt.Errorf("pod CIDR %v: want an IPv4 prefix of /29 or wider", p)
	}
	if !world.SafePrefix(p) {
		return netip.Prefix{}, fmt.Errorf("pod CIDR %v: not a test prefix (world.SafePrefix)", p)
	}
	if o.Netns == "" {
		// The plugins would put the pods' veths and forwarding in this
		// process's namespace: the machine's own network.
		return netip.Prefix{}, fmt.Errorf("pod CIDR %v without a Netns: pods would be wired into this machine's network", p)
	}
	return p, nil
}

// writeCNI gives the node its pod network: the plugins linked into
// Dir/cni/bin, and a conflist in Dir/cni/net.d with ptp (a veth per pod,
// its host end in containerd's namespace, routes both ways) and host-local
// addresses from n.PodCIDR, their state in Dir/cni/ipam. The pods' default
// route is the ptp gateway, the first address of the CIDR, on the host
// ends. No IP masquerade: the world sees the pods' own addresses (see
// world.RouteToClient for the way back).
func (n *Node) writeCNI() error {
	for _, p := range CNIPlugins {
		if err := os.Symlink(filepath.Join(n.Bins.CNIDir, p), filepath.Join(n.Dir, "cni/bin", p)); err != nil {
			return fmt.Errorf("cni plugin %s: %w", p, err)
		}
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       n.CNINetwork,
		"plugins": []any{map[string]any{
			"type":   "ptp",
			"ipMasq": false,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": n.PodCIDR.String()}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": filepath.Join(n.Dir, "cni/ipam"),
			},
		}},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.Dir, "cni/net.d", "10-criworld.conflist"), b, 0o644)
}

// removeCNICache removes what libcni cached for this node's network.
func (n *Node) removeCNICache() {
	if n.CNINetwork == "" {
		return
	}
	entries, _ := os.ReadDir(cniCacheDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), n.CNINetwork+"-") {
			_ = os.Remove(filepath.Join(cniCacheDir, e.Name()))
		}
	}
	// Rmdir, not RemoveAll: another runtime's entries stay.
	for _, d := range n.cniMadeDirs {
		_ = os.Remove(d)
	}
}

// CNICacheFiles are the files libcni holds for this node's network (one
// per attached pod until its DEL).
func (n *Node) CNICacheFiles() []string {
	var out []string
	entries, _ := os.ReadDir(cniCacheDir)
	for _, e := range entries {
		if n.CNINetwork != "" && strings.HasPrefix(e.Name(), n.CNINetwork+"-") {
			out = append(out, filepath.Join(cniCacheDir, e.Name()))
		}
	}
	return out
}

// PodIP is a pod's address as the runtime reports it (crictl inspectp):
// its CNI address for a pod with its own network, "" for a host-network
// pod.
func (n *Node) PodIP(podID string) (netip.Addr, error) {
	out, err := n.crictl("inspectp", "-o", "json", podID)
	if err != nil {
		return netip.Addr{}, err
	}
	var st struct {
		Status struct {
			Network struct {
				IP string `json:"ip"`
			} `json:"network"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return netip.Addr{}, fmt.Errorf("crictl inspectp %s: %w", podID, err)
	}
	if st.Status.Network.IP == "" {
		return netip.Addr{}, fmt.Errorf("pod %s has no IP", podID)
	}
	return netip.ParseAddr(st.Status.Network.IP)
}

// PodNetns is the network namespace of a pod's sandbox, as a file of its
// pause process (/proc/PID/ns/net).
func (n *Node) PodNetns(podID string) (string, error) {
	pid, err := n.SandboxPID(podID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("/proc/%d/ns/net", pid), nil
}

// NetnsMounts are the pods' network namespaces containerd has pinned
// below the node's directory (one per pod with its own network).
func (n *Node) NetnsMounts() []string {
	var out []string
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], n.Dir+"/") && strings.Contains(f[4], "/netns/") {
			out = append(out, f[4])
		}
	}
	return out
}
