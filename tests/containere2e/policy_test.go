// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
	"github.com/sluice-dev/sluice/tests/world"
)

// worldHost is a host of the test world: its address, a name for it in
// the test zone, and the port its TCP server listens on.
type worldHost struct {
	name string
	addr netip.Addr
	port uint16
}

func (h worldHost) portArg() string { return fmt.Sprint(h.port) }

// newHosts gives the world one address per name, each with a recording
// TCP server, and a DNS zone naming them.
func newHosts(t *testing.T, w *world.World, names map[string]string) map[string]worldHost {
	t.Helper()
	hosts := map[string]worldHost{}
	zone := map[string][]string{}
	for name, a := range names {
		addr := netip.MustParseAddr(a)
		w.AddWorldAddr(t, addr)
		hosts[name] = worldHost{name: name, addr: addr, port: w.ListenTCP(t, addr)}
		zone[name+"."] = []string{"A " + addr.String()}
	}
	w.ServeDNS(t, dnsAddr, world.Zone(zone))
	return hosts
}

// policyDaemon is a daemon of its own instance in the world namespace,
// with a machine allowlist and container_policies, each a list of
// allowlist entries written to a file.
type policyDaemon struct {
	*daemonProc
	dir, audit, sock string
	files            map[string]string // policy name -> its file
}

func startPolicyDaemon(t *testing.T, w *world.World, machine []string, policies map[string][]string) *policyDaemon {
	t.Helper()
	bin, instance := sluiceBinary(t)
	dir := t.TempDir()
	pd := &policyDaemon{dir: dir, audit: filepath.Join(dir, "audit.jsonl"), sock: filepath.Join(dir, "sluice.sock"), files: map[string]string{}}
	writeJSON := func(path string, v any) {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	allow := filepath.Join(dir, "network_allowlist.json")
	writeJSON(allow, map[string][]string{"allowed_hosts": machine})
	for name, entries := range policies {
		pd.files[name] = filepath.Join(dir, name+".json")
		writeJSON(pd.files[name], map[string][]string{"allowed_hosts": entries})
	}
	config := filepath.Join(dir, "sluice.json")
	writeJSON(config, map[string]any{"container_policies": pd.files})
	pd.daemonProc = &daemonProc{w: w, bin: bin, instance: instance, args: []string{"daemon", "--config", config, "--socket", pd.sock,
		"--allowlist", allow, "--state-dir", "/run/" + instance, "--audit-log", pd.audit, "--dns-upstream", dnsAddr.String(), "--group", "65534"}}
	pd.run(t)
	waitAudit(t, pd.audit, "daemon_started", 1)
	return pd
}

// command is a sluice command of the daemon's instance and socket.
func (pd *policyDaemon) command(args ...string) *exec.Cmd {
	c := exec.Command(pd.bin, append(args, "--socket", pd.sock)...)
	c.Env = append(os.Environ(), "SLUICE_INSTANCE="+pd.instance)
	return c
}

// sessions runs `sluice sessions` against the daemon.
func (pd *policyDaemon) sessions(t *testing.T) string {
	t.Helper()
	out, err := pd.command("sessions").CombinedOutput()
	if err != nil {
		t.Fatalf("sluice sessions: %v\n%s", err, out)
	}
	return string(out)
}

// probeIn runs the probe in a container with docker exec.
func probeIn(t *testing.T, e *dockertest.Engine, container string, args ...string) world.ProbeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o, err := e.Docker(ctx, append([]string{"exec", container, "probe"}, args...)...)
	r, perr := world.ParseProbeResult([]byte(o))
	if perr != nil {
		t.Fatalf("docker exec %s probe %v: %v %v %q", container, args, err, perr, o)
	}
	t.Logf("%s: probe %v -> %s", container, args, r)
	return r
}

// startIn starts a container that sleeps in the network namespace of the
// container netOf, with the probe mounted, and returns its id.
func startIn(t *testing.T, e *dockertest.Engine, name, netOf, probe string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"run", "-d", "--name", name, "--network", "container:" + netOf, "-v", probe + ":/usr/local/bin/probe:ro"}, extra...)
	id, err := e.Docker(ctx, append(args, dockertest.BaseImage, "sleep", "600")...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(id)
}

// TestContainerPolicies runs four containers under sluice's root in one
// network namespace whose only route leads to the test world: two with
// different sluice.policy labels, one without, one with a label naming no
// policy. Each reaches its own policy's hosts, by name and by address, and
// is refused the others' (EPERM, an explained audit line, nothing recorded
// by the world, no query reaching the world's DNS server); the unlabelled
// one gets the machine allowlist, the unknown label only loopback. An
// unconfined container in the same namespace reaches every host (the
// twin). `sluice sessions` names each policy; rewriting a policy file
// narrows and widens its container at once; a kill -9 of the daemon and a
// new one keep every container on its own policy.
func TestContainerPolicies(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	w := world.New(t)
	hosts := newHosts(t, w, map[string]string{"alpha.test": "203.0.113.31", "beta.test": "203.0.113.32", "machine.test": "203.0.113.33",
		"byaddress.test": "203.0.113.34"})
	a, b, m, x := hosts["alpha.test"], hosts["beta.test"], hosts["machine.test"], hosts["byaddress.test"]
	cidr := func(h worldHost) string { return h.addr.String() + "/32" }
	// x is alpha's by address only: never learned from DNS, so a policy
	// change that drops it shows at once.
	pd := startPolicyDaemon(t, w, []string{"alpha.test", "beta.test", "machine.test", cidr(a), cidr(b), cidr(m), cidr(x)},
		map[string][]string{"alpha": {"alpha.test", cidr(a), cidr(x)}, "beta": {"beta.test", cidr(b)}})
	probe := world.BuildProbe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	removeAtCleanup(t, e, "c-alpha", "c-beta", "c-plain", "c-unknown", "pod")

	// The namespace's holder is unconfined: the twin that shows every
	// host is reachable without sluice.
	if _, err := e.Docker(ctx, "run", "-d", "--name", "pod", "--network", "none", "-v", probe+":/usr/local/bin/probe:ro",
		dockertest.BaseImage, "sleep", "600"); err != nil {
		t.Fatal(err)
	}
	moveClientLink(t, w, containerPid(t, e, "pod"))
	for _, h := range []worldHost{a, b, m} {
		mark := time.Now()
		if r := probeIn(t, e, "pod", "tcp", h.addr.String(), h.portArg()); !r.OK {
			t.Fatalf("unconfined twin: %s unreachable without sluice: %s", h.name, r)
		}
		if !w.WaitArrival(world.All(world.To(h.addr), world.Since(mark)), 5*time.Second) {
			t.Fatalf("unconfined twin: the world recorded nothing from the connect to %s", h.name)
		}
	}

	parent := "--cgroup-parent=/" + pd.instance
	ids := map[string]string{
		"c-alpha":   startIn(t, e, "c-alpha", "pod", probe, parent, "--label", "sluice.policy=alpha"),
		"c-beta":    startIn(t, e, "c-beta", "pod", probe, parent, "--label", "sluice.policy=beta"),
		"c-plain":   startIn(t, e, "c-plain", "pod", probe, parent),
		"c-unknown": startIn(t, e, "c-unknown", "pod", probe, parent, "--label", "sluice.policy=nosuch"),
	}
	waitAudit(t, pd.audit, "session_started", 4)
	reach := map[string][]worldHost{"c-alpha": {a}, "c-beta": {b}, "c-plain": {a, b, m}, "c-unknown": nil}

	// The refusals first, while nothing else runs: the world must record
	// nothing at all, not even a DNS query.
	mark := time.Now()
	for c, allowed := range reach {
		for _, h := range []worldHost{a, b, m} {
			if containsHost(allowed, h) {
				continue
			}
			if r := probeIn(t, e, c, "tcp", h.addr.String(), h.portArg()); r.OK || r.Errno != "EPERM" {
				t.Errorf("%s -> %s by address: %s, want EPERM", c, h.name, r)
			}
			if r := probeIn(t, e, c, "resolve-tcp", h.name, h.portArg()); r.OK {
				t.Errorf("%s -> %s by name: %s, want a refused name", c, h.name, r)
			}
			id := ids[c]
			waitAuditMatch(t, pd.audit, fmt.Sprintf("egress_denied of %s to %s", c, h.name), func(e map[string]any) bool {
				return e["type"] == "egress_denied" && e["session"] == id && e["dst"] == h.addr.String() &&
					strings.Contains(fmt.Sprint(e["message"]), "not in the allowlist")
			})
		}
	}
	w.AssertNothingArrived(t, world.All(world.Any(world.To(a.addr), world.To(b.addr), world.To(m.addr)), world.Since(mark)), 300*time.Millisecond)
	if n := dnsSeen(w, mark); n != 0 {
		t.Errorf("the world's DNS server saw %d queries during the refusals, want none", n)
	}

	// Then what each may reach, by name and by address, each seen by the
	// world.
	for c, allowed := range reach {
		for _, h := range allowed {
			for _, args := range [][]string{{"tcp", h.addr.String(), h.portArg()}, {"resolve-tcp", h.name, h.portArg()}} {
				mark := time.Now()
				if r := probeIn(t, e, c, args...); !r.OK {
					t.Errorf("%s -> %s (%s): %s, want it reached", c, h.name, args[0], r)
				} else if !w.WaitArrival(world.All(world.To(h.addr), world.Since(mark)), 5*time.Second) {
					t.Errorf("%s -> %s (%s): the world recorded nothing", c, h.name, args[0])
				}
			}
		}
	}
	mark = time.Now()
	if r := probeIn(t, e, "c-alpha", "tcp", x.addr.String(), x.portArg()); !r.OK {
		t.Errorf("c-alpha -> its policy's address %s: %s", x.addr, r)
	} else if !w.WaitArrival(world.All(world.To(x.addr), world.Since(mark)), 5*time.Second) {
		t.Errorf("c-alpha -> %s: the world recorded nothing", x.addr)
	}
	// The unknown label's loopback works.
	if r := probeIn(t, e, "c-unknown", "tcp-self"); !r.OK {
		t.Errorf("c-unknown: loopback: %s, want it open", r)
	}
	waitAuditMatch(t, pd.audit, "a session_refused line naming the unknown label", func(e map[string]any) bool {
		return e["type"] == "session_refused" && e["session"] == ids["c-unknown"] && strings.Contains(fmt.Sprint(e["message"]), `"nosuch"`) &&
			strings.Contains(fmt.Sprint(e["message"]), "loopback only")
	})
	if !strings.Contains(pd.log.String(), `sluice.policy="nosuch"`) {
		t.Errorf("the daemon's log does not name the unknown label:\n%s", pd.log.String())
	}

	// sluice sessions names each container's policy.
	out := pd.sessions(t)
	for c, want := range map[string]string{"c-alpha": " alpha ", "c-beta": " beta ", "c-plain": " (machine) ", "c-unknown": ` "nosuch" (unknown: loopback only) `} {
		if !lineWith(out, ids[c], want) {
			t.Errorf("sluice sessions: no line for %s with policy %q:\n%s", c, want, out)
		}
	}

	// A policy file rewritten: c-alpha now gets machine.test, and loses
	// alpha.test and the addresses, at once (an address it already learned
	// from DNS stays until its TTL ends, as when the machine allowlist
	// narrows: the resolver's rule).
	b2, _ := json.Marshal(map[string][]string{"allowed_hosts": {"machine.test"}})
	tmp := pd.files["alpha"] + ".new"
	if err := os.WriteFile(tmp, b2, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, pd.files["alpha"]); err != nil {
		t.Fatal(err)
	}
	waitAuditMatch(t, pd.audit, "a policy_changed line for the alpha policy", func(e map[string]any) bool {
		return e["type"] == "policy_changed" && strings.Contains(fmt.Sprint(e["message"]), `container policy "alpha" reloaded`) &&
			strings.Contains(fmt.Sprint(e["message"]), "applied to 1 container sessions")
	})
	mark = time.Now()
	if r := probeIn(t, e, "c-alpha", "tcp", x.addr.String(), x.portArg()); r.OK || r.Errno != "EPERM" {
		t.Errorf("c-alpha -> %s after its policy dropped it: %s, want EPERM", x.addr, r)
	}
	if r := probeIn(t, e, "c-alpha", "resolve-tcp", a.name, a.portArg()); r.OK {
		t.Errorf("c-alpha -> alpha.test by name after its policy dropped it: %s, want a refused name", r)
	}
	w.AssertNothingArrived(t, world.All(world.Any(world.To(x.addr), world.To(a.addr)), world.Since(mark)), 200*time.Millisecond)
	mark = time.Now()
	if r := probeIn(t, e, "c-alpha", "resolve-tcp", m.name, m.portArg()); !r.OK {
		t.Errorf("c-alpha -> machine.test after its policy added it: %s", r)
	} else if !w.WaitArrival(world.All(world.To(m.addr), world.Since(mark)), 5*time.Second) {
		t.Errorf("c-alpha -> machine.test: the world recorded nothing")
	}
	// The other policy's container is untouched.
	if r := probeIn(t, e, "c-beta", "tcp", m.addr.String(), m.portArg()); r.OK || r.Errno != "EPERM" {
		t.Errorf("c-beta -> machine.test after alpha's change: %s, want EPERM", r)
	}

	// kill -9 and a new daemon: each container is attached again with its
	// own policy, read again from its engine record.
	pd.kill()
	pd.start(t)
	waitAudit(t, pd.audit, "session_started", 8)
	mark = time.Now()
	if r := probeIn(t, e, "c-beta", "tcp", a.addr.String(), a.portArg()); r.OK || r.Errno != "EPERM" {
		t.Errorf("c-beta -> alpha.test after a daemon restart: %s, want EPERM", r)
	}
	w.AssertNothingArrived(t, world.All(world.To(a.addr), world.Since(mark)), 200*time.Millisecond)
	mark = time.Now()
	if r := probeIn(t, e, "c-beta", "resolve-tcp", b.name, b.portArg()); !r.OK {
		t.Errorf("c-beta -> beta.test after a daemon restart: %s", r)
	} else if !w.WaitArrival(world.All(world.To(b.addr), world.Since(mark)), 5*time.Second) {
		t.Errorf("c-beta -> beta.test after a daemon restart: the world recorded nothing")
	}
}

// removeAtCleanup removes the containers before the daemon's cleanup (t.Cleanup
// runs last-registered first), so that the cgroup parents are empty when
// sluice cleanup and the test remove them.
func removeAtCleanup(t *testing.T, e *dockertest.Engine, names ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := e.Docker(ctx, append([]string{"rm", "-f"}, names...)...); err != nil {
			t.Logf("docker rm -f %v: %v", names, err)
		}
	})
}

func containsHost(hs []worldHost, h worldHost) bool {
	for _, x := range hs {
		if x.addr == h.addr {
			return true
		}
	}
	return false
}

// dnsSeen counts the DNS packets the world received since mark.
func dnsSeen(w *world.World, mark time.Time) int {
	return len(w.Arrivals(world.All(world.ToPort(dnsAddr, 53), world.Since(mark))))
}

// lineWith reports whether a line of out contains all of subs.
func lineWith(out string, subs ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(line+" ", s)
		}
		if ok {
			return true
		}
	}
	return false
}
