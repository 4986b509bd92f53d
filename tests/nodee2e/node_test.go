// SPDX-License-Identifier: Apache-2.0

//go:build linux

package nodee2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/tests/criworld"
	"github.com/sluice-dev/sluice/tests/world"
)

var dnsAddr = netip.MustParseAddr("203.0.113.53")

// nodeFixture is a world, a containerd node in its client namespace and
// the agent.
type nodeFixture struct {
	w        *world.World
	dns      *world.DNSServer
	node     *criworld.Node
	instance string
	dir      string
	state    string
	guard    string // the agent's copy of its guard, which the hook reads
	audit    string
	policies string
	allowed  uint16 // TCP server on AllowedV4 (allowed.test)
	denied   uint16 // TCP server on DeniedV4 (denied.test)
	agent    *exec.Cmd
	log      *lockedBuffer
	metrics  string // the agent's metrics address, on the node's loopback
	own      bool   // pods get their own network namespace (CNI)
	syncs    int    // the agent's Synchronize lines seen so far
}

// podCIDR is the pod network of the node: pods with their own network
// namespace, routed (not masqueraded) to the world, so the world records
// each pod's own address.
var podCIDR = netip.MustParsePrefix("198.51.100.128/25")

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const guardJSON = `{"namespaces": {
	"agents": {"default": "agents", "selectable": ["agents", "loopback"]},
	"ci-*": {"selectable": ["agents"]}
}}`

func newNodeFixture(t *testing.T) *nodeFixture {
	t.Helper()
	w := world.New(t)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	f := &nodeFixture{w: w, instance: "sluice-n2e-" + hex.EncodeToString(rnd[:]), dir: t.TempDir(), log: &lockedBuffer{}}
	f.state = "/run/" + f.instance
	f.metrics = fmt.Sprintf("127.0.0.1:%d", 20000+int(rnd[0])<<4|int(rnd[1]&15))
	f.audit = filepath.Join(f.dir, "audit.jsonl")
	f.guard = filepath.Join(f.dir, "lib", "namespaces.json")
	f.policies = filepath.Join(f.dir, "policies")
	if err := os.Mkdir(f.policies, 0o755); err != nil {
		t.Fatal(err)
	}
	zone := world.Zone(map[string][]string{
		"allowed.test.": {"A " + world.AllowedV4.String()},
		"denied.test.":  {"A " + world.DeniedV4.String()},
	})
	f.dns = w.ServeDNS(t, dnsAddr, zone)
	f.allowed = w.ListenTCP(t, world.AllowedV4)
	f.denied = w.ListenTCP(t, world.DeniedV4)
	f.write(t, filepath.Join(f.dir, "network_allowlist.json"), `{"allowed_hosts": ["allowed.test", "also.test"]}`)
	f.write(t, filepath.Join(f.policies, "agents.json"), `{"allowed_hosts": ["allowed.test"]}`)
	f.write(t, filepath.Join(f.policies, "loopback.json"), `{"allowed_hosts": []}`)
	f.write(t, filepath.Join(f.policies, "namespaces.json"), guardJSON)
	t.Cleanup(func() {
		f.stopAgent()
		c := exec.Command(sluiceBin, "cleanup", "--state-dir", f.state)
		c.Env = append(os.Environ(), "SLUICE_INSTANCE="+f.instance)
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("sluice cleanup: %v: %s", err, out)
		}
	})
	// The fail-closed hook, as the DaemonSet's docs install it in
	// containerd's base runtime spec.
	if err := w.RouteToClient(podCIDR); err != nil {
		t.Fatal(err)
	}
	f.node = criworld.StartNode(t, criworld.NodeOptions{Netns: w.ClientPath(), PodCIDR: podCIDR.String(), Hook: &criworld.Hook{
		Path: sluiceBin, Args: []string{sluiceBin, "node", "hook", "--guard-file", f.guard},
		Env: []string{"SLUICE_INSTANCE=" + f.instance}}})
	return f
}

func (f *nodeFixture) write(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startAgent runs `sluice node` in the node's network namespace (a
// DaemonSet's pod has the host network) and waits until containerd has
// registered it and handed it the running pods.
func (f *nodeFixture) startAgent(t *testing.T) {
	t.Helper()
	args := []string{"--socket", filepath.Join(f.dir, "sluice.sock"), "node", "--nri-socket", f.node.NRISocket,
		"--policies", f.policies, "--allowlist", filepath.Join(f.dir, "network_allowlist.json"), "--state-dir", f.state,
		"--audit-log", f.audit, "--dns-upstream", dnsAddr.String(), "--hook-dir", "", "--metrics-addr", f.metrics, "--guard-file", f.guard}
	// As a DaemonSet's container on a cgroup v2 node: in a cgroup of its
	// own, with its own cgroup namespace (/proc/PID/cgroup paths are then
	// relative to it), the host's cgroup tree mounted.
	cg, err := os.Open(f.agentCgroup(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	c := exec.Command(sluiceBin, args...)
	c.Env = append(os.Environ(), "SLUICE_INSTANCE="+f.instance)
	c.Stdout, c.Stderr = f.log, f.log
	c.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd()), Cloneflags: syscall.CLONE_NEWCGROUP}
	if err := f.w.StartInClient(c); err != nil {
		t.Fatalf("start sluice node: %v", err)
	}
	f.agent = c
	own, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/cgroup", c.Process.Pid))
	if mine, _ := os.Readlink("/proc/self/ns/cgroup"); own == "" || own == mine {
		t.Fatalf("the agent's cgroup namespace %q is not its own", own)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		// Synchronize has taken up the running pods when this is logged.
		if strings.Count(f.log.String(), "nri: synchronized with") > f.syncs {
			f.syncs++
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("sluice node did not register with containerd: %s", f.log.String())
}

// agentCgroup is the agent's own cgroup, made once and removed at the
// test's end.
func (f *nodeFixture) agentCgroup(t *testing.T) string {
	t.Helper()
	mount, err := cgroups.Mount()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mount, f.instance+"-agent")
	if err := os.Mkdir(dir, 0o755); err == nil {
		t.Cleanup(func() {
			f.stopAgent()
			for i := 0; i < 100; i++ {
				if err := syscall.Rmdir(dir); err == nil || os.IsNotExist(err) {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Errorf("remove the agent's cgroup %s", dir)
		})
	} else if !os.IsExist(err) {
		t.Fatal(err)
	}
	return dir
}

// stopAgent kills the agent, as a crash or an OOM kill would.
func (f *nodeFixture) stopAgent() {
	if f.agent == nil {
		return
	}
	_ = f.agent.Process.Signal(syscall.SIGKILL)
	_ = f.agent.Wait()
	f.agent = nil
}

// pod runs a pod and one container running the image's pause (so that the
// test execs its probes in it), and returns the container's id or the
// error that refused it.
func (f *nodeFixture) pod(t *testing.T, name, ns string, annotations map[string]string) (string, error) {
	t.Helper()
	_, ctr, err := f.podAndContainer(t, name, ns, annotations)
	return ctr, err
}

// podAndContainer is pod, with the pod's id.
func (f *nodeFixture) podAndContainer(t *testing.T, name, ns string, annotations map[string]string) (string, string, error) {
	t.Helper()
	podID, err := f.node.RunPod(t, criworld.PodSpec{Name: name, Namespace: ns, Annotations: annotations, OwnNetwork: f.own,
		Labels: map[string]string{"actions.github.com/scale-set-name": "agents-set"}})
	if err != nil {
		t.Fatalf("run pod %s/%s: %v", ns, name, err)
	}
	ctr, err := f.container(podID, "main")
	return podID, ctr, err
}

// container creates and starts one more container in a pod.
func (f *nodeFixture) container(podID, name string) (string, error) {
	ctr, err := f.node.CreateContainer(podID, criworld.ContainerSpec{Name: name})
	if err != nil {
		return "", err
	}
	if err := f.node.Start(ctr); err != nil {
		return "", err
	}
	return ctr, nil
}

// probe runs the probe in the container.
func (f *nodeFixture) probe(t *testing.T, ctr string, args ...string) world.ProbeResult {
	t.Helper()
	for _, a := range args {
		if ip, err := netip.ParseAddr(a); err == nil && !world.Safe(ip) {
			t.Fatalf("refusing a probe towards %v", ip)
		}
	}
	out, stderr, code, err := f.node.Exec(ctr, append([]string{"/probe"}, args...)...)
	if err != nil && code < 0 {
		t.Fatalf("exec probe %v: %v (%s)", args, err, stderr)
	}
	r, perr := world.ParseProbeResult([]byte(out))
	if perr != nil {
		t.Fatalf("probe %v: %v (stderr %q)", args, perr, stderr)
	}
	t.Logf("probe %s -> %s", strings.Join(args, " "), r.Line)
	return r
}

// contactsFrom counts the world's TCP contacts at addr:port since t0.
func (f *nodeFixture) contacts(addr netip.Addr, port uint16, since time.Time) int {
	n := 0
	for _, c := range f.w.Contacts() {
		if c.Proto == 6 && c.Local == netip.AddrPortFrom(addr, port) && !c.Time.Before(since) {
			n++
		}
	}
	return n
}

// connectDenied runs the attack, a plain connect to denied.test's
// address, and reports whether the world recorded it.
func (f *nodeFixture) connectDenied(t *testing.T, ctr string) (world.ProbeResult, bool) {
	t.Helper()
	t0 := time.Now()
	r := f.probe(t, ctr, "tcp", world.DeniedV4.String(), strconv.Itoa(int(f.denied)))
	time.Sleep(100 * time.Millisecond)
	return r, f.contacts(world.DeniedV4, f.denied, t0) > 0
}

// lookupAndConnect resolves allowed.test through the DNS the pod would use
// and connects to the answer.
func (f *nodeFixture) lookupAndConnect(t *testing.T, ctr, name string, port uint16) (world.ProbeResult, world.ProbeResult) {
	t.Helper()
	d := f.probe(t, ctr, "dns", dnsAddr.String(), "53", name, "A", "udp")
	c := f.probe(t, ctr, "tcp", world.AllowedV4.String(), strconv.Itoa(int(port)))
	return d, c
}

// scrape reads the agent's metrics, from the node's network namespace.
func (f *nodeFixture) scrape(t *testing.T) string {
	t.Helper()
	var body []byte
	err := f.w.InClient(func() error {
		c, err := net.DialTimeout("tcp", f.metrics, 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", f.metrics); err != nil {
			return err
		}
		body, err = io.ReadAll(c)
		return err
	})
	if err != nil {
		t.Fatalf("scrape the agent's metrics: %v", err)
	}
	return string(body)
}

// metricAtLeast reports whether the exposition has the series with a
// value of at least min.
func metricAtLeast(exposition, series string, min float64) bool {
	for _, l := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && f >= min
		}
	}
	return false
}

func (f *nodeFixture) auditEvents(t *testing.T) []map[string]any {
	t.Helper()
	return world.ReadAuditLog(t, f.audit)
}

// TestPodsOnANode: a pod of a guarded namespace reaches its policy's
// hosts and nothing else (EPERM, nothing recorded by the world), where the
// same attack from a pod of an unguarded namespace (the unconfined twin)
// reaches the denied host; a guarded pod that names no policy it may
// choose is refused before any container of its own runs; a guarded pod
// that already ran before the agent (so could not be refused) is held to
// loopback only when the agent starts, and its new containers are refused;
// a reload that guards a namespace confines its running pods at once;
// containerd's restart keeps pods confined and the agent registers again;
// the agent's death leaves running pods confined and the fail-closed hook
// refuses a guarded pod created meanwhile, while unguarded pods still run;
// a restarted agent takes its pods up again (Synchronize) and confines new
// ones. Audit events carry the pod's job identity and the pods' denials,
// the metrics count pods
// by namespace, policy and CI system.
func TestPodsOnANode(t *testing.T) {
	f := newNodeFixture(t)

	// A pod of a guarded namespace with no default policy that already
	// runs before the agent ever ran on this node (the hook has no guard
	// yet): it reaches denied.test's address.
	earlyPod, early, err := f.podAndContainer(t, "early", "ci-9", nil)
	if err != nil {
		t.Fatalf("a pod before the agent: %v", err)
	}
	if r, arrived := f.connectDenied(t, early); !r.OK || !arrived {
		t.Fatalf("before the agent, the pod did not reach denied.test's address: %s (recorded: %v)", r, arrived)
	}
	f.startAgent(t)
	// The agent's start takes it up (Synchronize): it cannot be refused
	// any more, so it is held to loopback only, and its new containers are
	// refused.
	if r, arrived := f.connectDenied(t, early); r.OK || r.Errno != "EPERM" || arrived {
		t.Errorf("a running pod the policies refuse, after the agent's start: %s (recorded: %v); want EPERM and nothing recorded", r, arrived)
	}
	if _, c := f.lookupAndConnect(t, early, "allowed.test", f.allowed); c.OK {
		t.Errorf("a running pod held to loopback reached allowed.test: %s", c)
	}
	if _, err := f.container(earlyPod, "second"); err == nil || !strings.Contains(err.Error(), "held to loopback only") {
		t.Errorf("a new container of a pod held to loopback: %v; want it refused", err)
	}

	// The unconfined twin: a pod of an unguarded namespace.
	web, err := f.pod(t, "web", "web", nil)
	if err != nil {
		t.Fatalf("an unguarded pod: %v", err)
	}
	if r, arrived := f.connectDenied(t, web); !r.OK || !arrived {
		t.Fatalf("the unconfined twin did not reach denied.test's address: %s (recorded: %v)", r, arrived)
	}

	// A guarded pod with its namespace's default policy.
	agent, err := f.pod(t, "agent", "agents", nil)
	if err != nil {
		t.Fatalf("a guarded pod with a default policy: %v\n%s", err, f.log.String())
	}
	if r, arrived := f.connectDenied(t, agent); r.OK || r.Errno != "EPERM" || arrived {
		t.Errorf("the confined pod to denied.test's address: %s (recorded: %v); want EPERM and nothing recorded", r, arrived)
	}
	t0 := time.Now()
	if d, c := f.lookupAndConnect(t, agent, "allowed.test", f.allowed); !d.OK || !c.OK {
		t.Errorf("the confined pod to allowed.test: lookup %s, connect %s", d, c)
	}
	if f.contacts(world.AllowedV4, f.allowed, t0) == 0 {
		t.Error("the world recorded no connection of the confined pod to allowed.test")
	}
	// A name the node allows but the pod's policy does not: never
	// forwarded upstream.
	if d := f.probe(t, agent, "dns", dnsAddr.String(), "53", "also.test", "A", "udp"); d.OK && d.Rcode == "NOERROR" {
		t.Errorf("also.test (the node's, not the pod's policy) resolved: %s", d)
	}
	if f.dns.Saw("also.test") {
		t.Error("also.test was forwarded upstream for a pod whose policy does not allow it")
	}

	// Annotation choices: one the namespace lets pods choose narrows
	// further; one it does not is refused with its reason.
	narrow, err := f.pod(t, "narrow", "agents", map[string]string{"sluice.dev/policy": "loopback"})
	if err != nil {
		t.Fatalf("a pod choosing a selectable policy: %v", err)
	}
	if _, c := f.lookupAndConnect(t, narrow, "allowed.test", f.allowed); c.OK {
		t.Errorf("a pod on the loopback policy reached allowed.test: %s", c)
	}
	if _, err := f.pod(t, "wide", "agents", map[string]string{"sluice.dev/policy": "wide-open"}); err == nil ||
		!strings.Contains(err.Error(), "refused by sluice") || !strings.Contains(err.Error(), "does not let its pods choose") {
		t.Errorf("a pod choosing a policy its namespace does not offer: %v", err)
	}
	if _, err := f.pod(t, "job", "ci-7", nil); err == nil || !strings.Contains(err.Error(), "has no default policy") {
		t.Errorf("a guarded pod naming no policy: %v", err)
	}
	if _, err := f.pod(t, "asks", "web", map[string]string{"sluice.dev/policy": "agents"}); err == nil ||
		!strings.Contains(err.Error(), "not guarded") {
		t.Errorf("an unguarded pod asking for a policy: %v", err)
	}

	// A reload that guards a namespace takes up its running pods at once.
	late, err := f.pod(t, "late", "late", nil)
	if err != nil {
		t.Fatalf("a pod of a namespace not yet guarded: %v", err)
	}
	if r, arrived := f.connectDenied(t, late); !r.OK || !arrived {
		t.Fatalf("a pod of a namespace not yet guarded did not reach denied.test's address: %s (recorded: %v)", r, arrived)
	}
	f.write(t, filepath.Join(f.policies, "namespaces.json"), strings.Replace(guardJSON, `"ci-*"`, `"late": {"default": "agents"},
	"ci-*"`, 1))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(f.log.String(), "newly guarded") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if r, arrived := f.connectDenied(t, late); r.OK || r.Errno != "EPERM" || arrived {
		t.Errorf("after the reload that guards its namespace, the pod to denied.test's address: %s (recorded: %v); want EPERM, nothing recorded\n%s", r, arrived, f.log.String())
	}
	t0 = time.Now()
	if d, c := f.lookupAndConnect(t, late, "allowed.test", f.allowed); !d.OK || !c.OK || f.contacts(world.AllowedV4, f.allowed, t0) == 0 {
		t.Errorf("after the reload, the newly guarded pod to allowed.test: lookup %s, connect %s", d, c)
	}

	// containerd restarts (an upgrade): the pods run on, confined, and the
	// agent's plugin registers again.
	if err := f.node.Restart(); err != nil {
		t.Fatalf("restart containerd: %v", err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for strings.Count(f.log.String(), "nri: synchronized with") == f.syncs && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Count(f.log.String(), "nri: synchronized with") == f.syncs {
		t.Fatalf("the agent did not register again after containerd's restart:\n%s", f.log.String())
	}
	f.syncs++
	if r, arrived := f.connectDenied(t, agent); r.OK || arrived {
		t.Errorf("after containerd's restart, the confined pod reached denied.test's address: %s (recorded: %v)", r, arrived)
	}
	if again, err := f.pod(t, "again", "agents", nil); err != nil {
		t.Errorf("a guarded pod after containerd's restart: %v\n%s", err, f.log.String())
	} else if r, arrived := f.connectDenied(t, again); r.OK || arrived {
		t.Errorf("a pod made after containerd's restart reached denied.test's address: %s (recorded: %v)", r, arrived)
	}

	// The agent dies.
	f.stopAgent()
	if r, arrived := f.connectDenied(t, agent); r.OK || arrived {
		t.Errorf("with the agent down, the confined pod reached denied.test's address: %s (recorded: %v)", r, arrived)
	}
	if _, err := f.pod(t, "meanwhile", "agents", nil); err == nil {
		t.Error("with the agent down, a guarded pod's container was created: the hook must refuse it")
	} else if !strings.Contains(err.Error(), "namespace agents is guarded") {
		t.Errorf("with the agent down, a guarded pod refused with %v; want the hook's reason", err)
	}
	if _, err := f.pod(t, "web2", "web", nil); err != nil {
		t.Errorf("with the agent down, an unguarded pod: %v", err)
	}

	// The node reboots: bpffs and /run are empty (sluice cleanup empties
	// them here), and the kubelet starts pods before the agent's. The
	// guard's copy is on disk: the hook still refuses guarded pods.
	c := exec.Command(sluiceBin, "cleanup", "--state-dir", f.state)
	c.Env = append(os.Environ(), "SLUICE_INSTANCE="+f.instance)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("sluice cleanup: %v: %s", err, out)
	}
	if _, err := os.Stat(f.guard); err != nil {
		t.Fatalf("the guard's copy did not outlive the state: %v", err)
	}
	if _, err := f.pod(t, "after-reboot", "agents", nil); err == nil || !strings.Contains(err.Error(), "namespace agents is guarded") {
		t.Errorf("after a reboot with the agent not yet up, a guarded pod: %v; want the hook's refusal", err)
	}
	if _, err := f.pod(t, "web3", "web", nil); err != nil {
		t.Errorf("after a reboot with the agent not yet up, an unguarded pod: %v", err)
	}

	// It comes back: the running pod is its again, a new pod is confined.
	f.startAgent(t)
	t0 = time.Now()
	if d, c := f.lookupAndConnect(t, agent, "allowed.test", f.allowed); !d.OK || !c.OK {
		t.Errorf("after the agent's restart, the pod to allowed.test: lookup %s, connect %s\n%s", d, c, f.log.String())
	}
	if f.contacts(world.AllowedV4, f.allowed, t0) == 0 {
		t.Error("after the agent's restart, the world recorded no connection to allowed.test")
	}
	later, err := f.pod(t, "later", "agents", nil)
	if err != nil {
		t.Fatalf("a guarded pod after the restart: %v", err)
	}
	if r, arrived := f.connectDenied(t, later); r.OK || arrived {
		t.Errorf("a pod after the restart reached denied.test's address: %s (recorded: %v)", r, arrived)
	}

	// The metrics, by namespace, policy and CI system (since the restart:
	// Synchronize took up the running pods, one held to loopback).
	m := f.scrape(t)
	for _, series := range []string{`sluice_pod_sessions_total{ci="arc",namespace="agents",policy="agents"}`,
		`sluice_pods_refused_total{ci="arc",namespace="ci-9"}`} {
		if !metricAtLeast(m, series, 1) {
			t.Errorf("the agent's metrics lack %s >= 1:\n%s", series, m)
		}
	}

	// The audit log: the refusals and the confinement, with the identity.
	var started, refused, denied int
	for _, e := range f.auditEvents(t) {
		job, _ := e["job"].(map[string]any)
		switch e["type"] {
		case "egress_denied":
			if sess, _ := e["session"].(string); strings.HasPrefix(sess, "pod") && e["dst"] == world.DeniedV4.String() {
				denied++
			}
		case "session_started":
			if job != nil && strings.HasPrefix(job["pod"].(string), "agents/") {
				started++
				if job["actions.github.com/scale-set-name"] != "agents-set" {
					t.Errorf("session_started without the ARC label: %v", e)
				}
			}
		case "session_refused":
			if job != nil {
				refused++
			}
		}
	}
	if denied == 0 {
		t.Error("audit: no egress_denied of a pod's session to denied.test's address")
	}
	if started < 3 || refused < 3 {
		t.Errorf("audit: %d pod sessions started, %d pods refused; want at least 3 and 3", started, refused)
	}
}

// TestPodsWithTheirOwnNetwork: pods as most Kubernetes pods are, each in
// its own network namespace wired by CNI. A guarded pod's DNS is answered
// by its resolver inside its own namespace (the datapath sends it there
// whatever server the pod asks), and it reaches its policy's host and
// nothing else; the same attack from an unguarded pod reaches the denied
// host, from the pod's own address.
func TestPodsWithTheirOwnNetwork(t *testing.T) {
	f := newNodeFixture(t)
	f.own = true
	f.startAgent(t)

	web, err := f.pod(t, "web", "web", nil)
	if err != nil {
		t.Fatalf("an unguarded pod: %v", err)
	}
	if r, arrived := f.connectDenied(t, web); !r.OK || !arrived {
		t.Fatalf("the unconfined twin did not reach denied.test's address: %s (recorded: %v)", r, arrived)
	}
	for _, c := range f.w.Contacts() {
		if c.Local.Addr() == world.DeniedV4 && !podCIDR.Contains(c.Remote.Addr()) {
			t.Errorf("the twin's connection came from %v, not from a pod address", c.Remote)
		}
	}

	agentPod, agent, err := f.podAndContainer(t, "agent", "agents", nil)
	if err != nil {
		t.Fatalf("a guarded pod: %v\n%s", err, f.log.String())
	}
	if r, arrived := f.connectDenied(t, agent); r.OK || r.Errno != "EPERM" || arrived {
		t.Errorf("the confined pod to denied.test's address: %s (recorded: %v); want EPERM and nothing recorded", r, arrived)
	}
	t0 := time.Now()
	if d, c := f.lookupAndConnect(t, agent, "allowed.test", f.allowed); !d.OK || !c.OK {
		t.Errorf("the confined pod to allowed.test: lookup %s, connect %s", d, c)
	}
	ip, err := f.node.PodIP(agentPod)
	if err != nil {
		t.Fatal(err)
	}
	from := 0
	for _, c := range f.w.Contacts() {
		if c.Local == netip.AddrPortFrom(world.AllowedV4, f.allowed) && !c.Time.Before(t0) && c.Remote.Addr() == ip {
			from++
		}
	}
	if from == 0 {
		t.Errorf("the world recorded no connection to allowed.test from the pod's address %s", ip)
	}
	if d := f.probe(t, agent, "dns", dnsAddr.String(), "53", "also.test", "A", "udp"); d.OK && d.Rcode == "NOERROR" {
		t.Errorf("also.test (the node's, not the pod's policy) resolved: %s", d)
	}
	if f.dns.Saw("also.test") {
		t.Error("also.test was forwarded upstream for a pod whose policy does not allow it")
	}
}
