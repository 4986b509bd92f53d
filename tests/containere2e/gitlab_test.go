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

// serviceScript is the service container's program: a TCP server on its
// loopback (port 5432, as a database would) that, for each client line
// "ADDR PORT", connects there itself and answers "svc ok <greeting>" or
// "svc err <error>": the service's own egress, judged in its own cgroup.
const serviceScript = `use IO::Socket::INET;
my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 5432, Listen => 5, ReuseAddr => 1) or die "listen: $!";
open(my $r, ">", "/out/svc-ready"); close $r;
while (my $c = $l->accept) {
	my $t = <$c>; chomp $t;
	my ($h, $p) = split / /, $t;
	my $o = IO::Socket::INET->new(PeerAddr => $h, PeerPort => $p, Timeout => 3);
	if ($o) { my $g = <$o>; print $c "svc ok $g"; close $o } else { print $c "svc err $!\n" }
	close $c;
}`

// jobScript is the job's script, as the runner would run it in the job
// container: it waits for the go file, then reaches the registry by name,
// tries a host outside its policy, and asks the service to do both.
func jobScript(registry, denied worldHost) string {
	// The service resolves the registry's name itself (through its own
	// session's resolver); the other host is asked for by address.
	ask := func(host string, port uint16) string {
		return fmt.Sprintf(`(exec 3<>/dev/tcp/127.0.0.1/5432 && echo "%s %d" >&3 && cat <&3) 2>&1`, host, port)
	}
	return fmt.Sprintf(`while [ ! -e /out/go ]; do sleep 0.05; done
probe resolve-tcp %s %d > /out/job-allowed.json
probe tcp %s %d > /out/job-denied.json
%s > /out/svc-allowed.txt
%s > /out/svc-denied.txt
touch /out/job-done
exec sleep 600`, registry.name, registry.port, denied.addr, denied.port, ask(registry.name, registry.port), ask(denied.addr.String(), denied.port))
}

// TestGitLabJobAndServiceConfined runs what GitLab's Docker executor runs
// for a job with cgroup_parent set in [runners.docker] and a sluice.policy
// label from its container_labels: a service container and the job
// container, both under sluice's root, sharing a network namespace whose
// only route leads to the test world. The job's script reaches the
// registry its policy allows, by name, and talks to the service over
// loopback; the job and the service are both refused a host outside the
// policy (EPERM, an audit line for each session, nothing recorded by the
// world). An unconfined container in the same namespace reaches that host
// (the twin).
func TestGitLabJobAndServiceConfined(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	w := world.New(t)
	hosts := newHosts(t, w, map[string]string{"registry.test": "203.0.113.41", "elsewhere.test": "203.0.113.42"})
	registry, denied := hosts["registry.test"], hosts["elsewhere.test"]
	pd := startPolicyDaemon(t, w, []string{"registry.test", "elsewhere.test"}, map[string][]string{"ci": {"registry.test"}})
	probe := world.BuildProbe(t)
	out := t.TempDir()
	_ = os.Chmod(out, 0o777)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	removeAtCleanup(t, e, "twin", "job", "svc")
	// What the runner passes for cgroup_parent and container_labels.
	runner := []string{"--cgroup-parent=/" + pd.instance, "--label", "sluice.policy=ci", "-v", probe + ":/usr/local/bin/probe:ro", "-v", out + ":/out"}

	svc, err := e.Docker(ctx, append(append([]string{"run", "-d", "--name", "svc", "--network", "none"}, runner...),
		dockertest.BaseImage, "perl", "-e", serviceScript)...)
	if err != nil {
		t.Fatal(err)
	}
	svc = strings.TrimSpace(svc)
	waitPath(t, filepath.Join(out, "svc-ready"))
	moveClientLink(t, w, containerPid(t, e, "svc"))
	job, err := e.Docker(ctx, append(append([]string{"run", "-d", "--name", "job", "--network", "container:svc"}, runner...),
		dockertest.BaseImage, "bash", "-c", jobScript(registry, denied))...)
	if err != nil {
		t.Fatal(err)
	}
	job = strings.TrimSpace(job)
	waitAudit(t, pd.audit, "session_started", 2)

	// The unconfined twin: the same namespace, no cgroup parent.
	startIn(t, e, "twin", "svc", probe)
	mark := time.Now()
	if r := probeIn(t, e, "twin", "tcp", denied.addr.String(), denied.portArg()); !r.OK {
		t.Fatalf("unconfined twin: %s unreachable without sluice: %s", denied.name, r)
	}
	if !w.WaitArrival(world.All(world.To(denied.addr), world.Since(mark)), 5*time.Second) {
		t.Fatal("unconfined twin: the world recorded nothing")
	}

	mark = time.Now()
	if err := os.WriteFile(filepath.Join(out, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitPath(t, filepath.Join(out, "job-done"))
	w.AssertNothingArrived(t, world.All(world.To(denied.addr), world.Since(mark)), 300*time.Millisecond)
	if !w.WaitArrival(world.All(world.To(registry.addr), world.Since(mark)), 5*time.Second) {
		t.Error("the job's and the service's connects to the registry: the world recorded nothing")
	}
	if r := readProbe(t, filepath.Join(out, "job-allowed.json")); !r.OK {
		t.Errorf("the job -> registry.test by name: %s", r)
	}
	if r := readProbe(t, filepath.Join(out, "job-denied.json")); r.OK || r.Errno != "EPERM" {
		t.Errorf("the job -> elsewhere.test: %s, want EPERM", r)
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return strings.TrimSpace(string(b))
	}
	if got := read("svc-allowed.txt"); got != "svc ok "+strings.TrimSpace(world.Greeting) {
		t.Errorf("the job asked the service to reach the registry: %q, want the registry's greeting through the service", got)
	}
	if got := read("svc-denied.txt"); !strings.Contains(got, "svc err") || !strings.Contains(got, "not permitted") {
		t.Errorf("the job asked the service to reach elsewhere.test: %q, want the service refused (EPERM)", got)
	}
	for who, id := range map[string]string{"job": job, "service": svc} {
		waitAuditMatch(t, pd.audit, "an egress_denied line of the "+who, func(e map[string]any) bool {
			return e["type"] == "egress_denied" && e["session"] == id && e["dst"] == denied.addr.String()
		})
	}
	sessions := pd.sessions(t)
	for _, id := range []string{job, svc} {
		if !lineWith(sessions, id, " ci ") {
			t.Errorf("sluice sessions: no line for %s with policy ci:\n%s", id[:12], sessions)
		}
	}
}
