// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sluice-dev/sluice/tests/dockertest"
	"github.com/sluice-dev/sluice/tests/world"
)

var dnsAddr = netip.MustParseAddr("203.0.113.53")

// TestWholeContainerConfined starts an unprivileged container with
// --cgroup-parent set to sluice's cgroup root and nothing of sluice inside
// it: its entrypoint is confined from its first instruction, `docker exec`
// processes reach an allowed world host by name (through the session's
// resolver, listening in the container's own network namespace) and by
// CIDR, and a denied one gets EPERM and an audit line while the world
// records nothing. A kill -9 of the daemon leaves it confined and the next
// daemon attaches it again; a restarted container is a new session, still
// confined; a removed one leaves nothing behind.
func TestWholeContainerConfined(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	w := world.New(t)
	w.ServeDNS(t, dnsAddr, world.Zone(map[string][]string{"allowed.test.": {"A " + world.AllowedV4.String()}}))
	allowedPort := w.ListenTCP(t, world.AllowedV4)
	deniedPort := w.ListenTCP(t, world.DeniedV4)
	cidrPort := w.ListenTCP(t, world.WorldV4) // the world's end of the link
	bin, instance := sluiceBinary(t)
	dir := t.TempDir()
	allow := filepath.Join(dir, "network_allowlist.json")
	b, _ := json.Marshal(map[string][]string{"allowed_hosts": {"allowed.test", world.WorldV4.String() + "/32"}})
	if err := os.WriteFile(allow, b, 0o644); err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(dir, "audit.jsonl")
	// The daemon lives in the world namespace, where the test's DNS server
	// is its upstream; the container will take the client's end of the
	// link, so the world's sniffer sees everything it sends.
	d := &daemonProc{w: w, bin: bin, instance: instance, args: []string{"daemon", "--socket", filepath.Join(dir, "sluice.sock"),
		"--allowlist", allow, "--state-dir", "/run/" + instance, "--audit-log", audit, "--dns-upstream", dnsAddr.String(), "--group", "65534"}}
	d.run(t)
	waitAudit(t, audit, "daemon_started", 1)

	out := t.TempDir()
	_ = os.Chmod(out, 0o777)
	probe := world.BuildProbe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The entrypoint's first instruction is a connect: before any route
	// exists, and before the daemon can have attached the container.
	first := fmt.Sprintf("probe tcp %s %d > /out/first.tmp; mv /out/first.tmp /out/first.json; exec sleep 600", world.DeniedV4, deniedPort)
	id, err := e.Docker(ctx, "run", "-d", "--name", "agent", "--network", "none", "--cgroup-parent", "/"+instance,
		"-v", probe+":/usr/local/bin/probe:ro", "-v", out+":/out", dockertest.BaseImage, "sh", "-c", first)
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimSpace(id)
	waitPath(t, filepath.Join(out, "first.json"))
	if r := readProbe(t, filepath.Join(out, "first.json")); r.OK || r.Errno != "EPERM" {
		t.Errorf("the entrypoint's first connect: %s, want EPERM", r)
	}
	started := waitAudit(t, audit, "session_started", 1)
	if started["session"] != id {
		t.Fatalf("session_started %v, want the container %s", started, id)
	}
	pid := containerPid(t, e, "agent")
	moveClientLink(t, w, pid)

	exec1 := func(args ...string) world.ProbeResult {
		t.Helper()
		o, err := e.Docker(ctx, append([]string{"exec", "agent", "probe"}, args...)...)
		r, perr := world.ParseProbeResult([]byte(o))
		if perr != nil {
			t.Fatalf("docker exec probe %v: %v %v %q", args, err, perr, o)
		}
		t.Logf("docker exec probe %v -> %s", args, r)
		return r
	}
	if r := exec1("resolve-tcp", "allowed.test", fmt.Sprint(allowedPort)); !r.OK {
		t.Errorf("an allowed host by name from a docker exec shell: %s", r)
	}
	if r := exec1("tcp", world.WorldV4.String(), fmt.Sprint(cidrPort)); !r.OK {
		t.Errorf("an allowed CIDR from a docker exec shell: %s", r)
	}
	if r := exec1("tcp", world.DeniedV4.String(), fmt.Sprint(deniedPort)); r.OK || r.Errno != "EPERM" {
		t.Errorf("a denied host: %s, want EPERM", r)
	}
	w.AssertNothingArrived(t, world.To(world.DeniedV4), 200*time.Millisecond)
	waitAuditMatch(t, audit, "an egress_denied line naming the container's session and the denied host", func(e map[string]any) bool {
		return e["type"] == "egress_denied" && e["session"] == id && e["dst"] == world.DeniedV4.String() &&
			strings.Contains(fmt.Sprint(e["message"]), "not in the allowlist")
	})

	// kill -9 of the daemon: still confined; the next daemon attaches the
	// container again, resolver included.
	d.kill()
	if r := exec1("tcp", world.DeniedV4.String(), fmt.Sprint(deniedPort)); r.OK || r.Errno != "EPERM" {
		t.Errorf("a denied host with no daemon: %s, want EPERM", r)
	}
	d.start(t)
	waitAudit(t, audit, "session_started", 2)
	if r := exec1("resolve-tcp", "allowed.test", fmt.Sprint(allowedPort)); !r.OK {
		t.Errorf("an allowed name after the daemon restarted: %s", r)
	}
	w.AssertNothingArrived(t, world.To(world.DeniedV4), 100*time.Millisecond)

	// docker restart: a new cgroup, a new session, still confined.
	if o, err := e.Docker(ctx, "restart", "-t", "1", "agent"); err != nil {
		t.Fatalf("docker restart: %v %s", err, o)
	}
	waitAudit(t, audit, "session_started", 3)
	if r := exec1("tcp", world.DeniedV4.String(), fmt.Sprint(deniedPort)); r.OK || r.Errno != "EPERM" {
		t.Errorf("a denied host after docker restart: %s, want EPERM", r)
	}

	// docker rm: the session ends and its cgroup is gone.
	if o, err := e.Docker(ctx, "rm", "-f", "agent"); err != nil {
		t.Fatalf("docker rm: %v %s", err, o)
	}
	waitAudit(t, audit, "session_ended", 2)
	root := cgroupRoot(t, instance)
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, _ := filepath.Glob(filepath.Join(root, id[:12]+"*"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container's cgroup is left behind: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// daemonProc is a sluice daemon in the world namespace (w set), or in
// the test's own.
type daemonProc struct {
	w        *world.World
	bin      string
	instance string
	args     []string
	cmd      *exec.Cmd
	log      bytes.Buffer
}

func (d *daemonProc) start(t *testing.T) {
	t.Helper()
	if d.w != nil {
		d.cmd = d.w.WorldCmd(context.Background(), d.bin, d.args...)
	} else {
		d.cmd = exec.Command(d.bin, d.args...)
	}
	d.cmd.Env = append(os.Environ(), "SLUICE_INSTANCE="+d.instance)
	d.cmd.Stdout, d.cmd.Stderr = &d.log, &d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

// run starts the daemon and, when the test ends, kills it, runs sluice
// cleanup for its instance, removes the cgroup parents the engine left
// in every cgroup v1 hierarchy, and shows its log if the test failed.
func (d *daemonProc) run(t *testing.T) {
	t.Helper()
	d.start(t)
	t.Cleanup(func() {
		d.kill()
		c := exec.Command(d.bin, "cleanup", "--state-dir", "/run/"+d.instance)
		c.Env = append(os.Environ(), "SLUICE_INSTANCE="+d.instance)
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("sluice cleanup: %v\n%s", err, out)
		}
		for _, dir := range v1Parents(t, d.instance) {
			if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
				t.Errorf("remove %s: %v", dir, err)
			}
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log.String())
		}
	})
}

func (d *daemonProc) kill() {
	if d.cmd != nil && d.cmd.Process != nil {
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		_ = d.cmd.Wait()
		d.cmd = nil
	}
}

// sluiceBinary builds sluice for this test with an instance of its own.
func sluiceBinary(t *testing.T) (bin, instance string) {
	bin = filepath.Join(t.TempDir(), "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluice-dev/sluice/cmd/sluice").CombinedOutput(); err != nil {
		t.Fatalf("build sluice: %v\n%s", err, out)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return bin, "sluice-ctrw-" + hex.EncodeToString(rnd[:])
}

func containerPid(t *testing.T, e *dockertest.Engine, name string) int {
	t.Helper()
	o, err := e.Docker(context.Background(), "inspect", "-f", "{{.State.Pid}}", name)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(o, &pid); err != nil || pid <= 0 {
		t.Fatalf("container pid %q: %v", o, err)
	}
	return pid
}

// moveClientLink moves the client's end of the world's link into the
// container's network namespace and configures it as the client's was:
// the container's only route then leads to the world.
func moveClientLink(t *testing.T, w *world.World, pid int) {
	t.Helper()
	cns, err := netns.GetFromPath(w.ClientPath())
	if err != nil {
		t.Fatal(err)
	}
	defer cns.Close()
	ch, err := netlink.NewHandleAt(cns)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	link, err := ch.LinkByName(world.ClientIface)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.LinkSetNsPid(link, pid); err != nil {
		t.Fatalf("move %s into the container: %v", world.ClientIface, err)
	}
	kns, err := netns.GetFromPid(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer kns.Close()
	kh, err := netlink.NewHandleAt(kns)
	if err != nil {
		t.Fatal(err)
	}
	defer kh.Close()
	if link, err = kh.LinkByName(world.ClientIface); err != nil {
		t.Fatal(err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(world.ClientV4.AsSlice()), Mask: net.CIDRMask(world.LinkV4Prefix.Bits(), 32)}}
	if err := kh.AddrAdd(link, addr); err != nil {
		t.Fatal(err)
	}
	if err := kh.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	if err := kh.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.IP(world.WorldV4.AsSlice())}); err != nil {
		t.Fatalf("default route in the container: %v", err)
	}
	// The link must carry traffic before the positives run.
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := kh.LinkByName(world.ClientIface)
		if err == nil && l.Attrs().OperState == netlink.OperUp {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in the container is not up within 10 s", world.ClientIface)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readProbe(t *testing.T, path string) world.ProbeResult {
	t.Helper()
	b, _ := os.ReadFile(path)
	r, err := world.ParseProbeResult(b)
	if err != nil {
		t.Fatalf("%s: %v: %q", path, err, b)
	}
	return r
}

// cgroupRoot is the instance's cgroup root under the cgroup2 mount.
func cgroupRoot(t *testing.T, instance string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 9 && strings.Contains(line, " - cgroup2 ") {
			return filepath.Join(f[4], instance)
		}
	}
	t.Fatal("no cgroup2 mount")
	return ""
}

// waitAuditMatch waits (bounded) for an audit line that match accepts.
func waitAuditMatch(t *testing.T, path, what string, match func(map[string]any) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			for _, e := range world.ReadAuditLog(t, path) {
				if match(e) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(path)
			t.Fatalf("no %s in the audit log within 30 s:\n%s", what, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// v1Parents are the directories named instance at the top of each mounted
// cgroup v1 hierarchy.
func v1Parents(t *testing.T, instance string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.Contains(line, " - cgroup ") {
			out = append(out, filepath.Join(f[4], instance))
		}
	}
	return out
}
