// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

// TestNestedCgroupDenialNamesItsSession: a process in a cgroup below a
// daemon session's (as a container runtime given the session as its
// cgroup parent makes) is confined, and its denial reaches the audit log
// and the session's client as the session's, with the session's name;
// every audit line matches docs/audit.schema.json.
func TestNestedCgroupDenialNamesItsSession(t *testing.T) {
	f := newFixture(t, "allowed.test")
	probe, d := world.BuildProbe(t), f.dir
	script := fmt.Sprintf(`
sh -c 'echo $$ > %[3]s/pid.tmp; mv %[3]s/pid.tmp %[3]s/pid; while [ ! -e %[3]s/go ]; do sleep 0.05; done; exec %[1]s tcp %[4]s %[2]d > %[3]s/1.tmp'
mv %[3]s/1.tmp %[3]s/1
while [ ! -e %[3]s/go2 ]; do sleep 0.05; done
`, probe, f.denied, d, world.DeniedV4)
	done := make(chan struct{})
	var stderr string
	go func() {
		defer close(done)
		_, stderr, _ = f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
	}()
	pid := strings.TrimSpace(string(waitFile(t, d+"/pid")))
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	cg := ""
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			cg = p
		}
	}
	session := filepath.Base(cg)
	if !strings.HasPrefix(session, "run-") {
		t.Fatalf("the command is not in a session cgroup: %q", cg)
	}
	mount, err := cgroups.Mount()
	if err != nil {
		t.Fatal(err)
	}
	nested := filepath.Join(mount, cg, "nested")
	if err := os.Mkdir(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(nested) })
	if err := os.WriteFile(filepath.Join(nested, "cgroup.procs"), []byte(pid), 0o644); err != nil {
		t.Fatalf("move %s into %s: %v", pid, nested, err)
	}
	if err := os.WriteFile(d+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/1")); r.OK || r.Errno != "EPERM" {
		t.Fatalf("a process in a cgroup below the session reached a denied host: %s", r)
	}
	f.w.AssertNothingArrived(t, world.To(world.DeniedV4), 200*time.Millisecond)
	e := f.waitAudit(t, "egress_denied", func(e map[string]any) bool { return e["dst"] == world.DeniedV4.String() })
	if e["session"] != session || e["comm"] != "probe" {
		t.Fatalf("the denial of a process below session %s: %v", session, e)
	}
	if err := os.Remove(nested); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d+"/go2", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.waitAudit(t, "session_ended", nil)
	<-done
	if !strings.Contains(stderr, "denied probe[") {
		t.Errorf("the denial did not reach the session's client:\n%s", stderr)
	}
	f.auditEvents(t) // every line validates
}

// TestUnownedSessionDenialsNamedAndLimited: a session that no daemon owns
// (its record was lost while the daemon was down) stays confined; the new
// daemon's lines for its denials name it and are rate limited like any
// session's.
func TestUnownedSessionDenialsNamedAndLimited(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	d := f.dir
	const n = 3000
	script := fmt.Sprintf(`
echo $$ > %[1]s/pid.tmp; mv %[1]s/pid.tmp %[1]s/pid
while [ ! -e %[1]s/go ]; do sleep 0.05; done
for i in $(seq %[2]d); do : 2>/dev/null >/dev/tcp/203.0.113.20/%[3]d; done
echo done > %[1]s/done
`, d, n, f.denied)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "bash", "-c", script)
	}()
	pid := strings.TrimSpace(string(waitFile(t, d+"/pid")))
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	session := ""
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			session = filepath.Base(p)
		}
	}
	f.stopDaemon(t) // kill -9
	record := filepath.Join("/run", f.instance, "daemon", session+".json")
	if err := os.Remove(record); err != nil {
		t.Fatalf("remove the session's record: %v", err)
	}
	f.startDaemon(t)
	start := time.Now()
	if err := os.WriteFile(d+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFile(t, d+"/done")
	elapsed := time.Since(start)
	<-done // the client's stream ends with the session's last process
	f.w.AssertNothingArrived(t, world.To(world.DeniedV4), 200*time.Millisecond)
	f.waitAudit(t, "egress_denied", func(e map[string]any) bool { return e["session"] == session })
	// A clean stop writes what is still suppressed.
	_ = f.daemon.Process.Signal(syscall.SIGTERM)
	_ = f.daemon.Wait()
	f.daemon = nil
	written, suppressed := 0, 0
	for _, e := range f.auditEvents(t) { // every line validates
		switch {
		case e["type"] == "egress_denied" && e["session"] == session:
			written++
		case e["type"] == "egress_denied":
			t.Errorf("a denial of the unowned session %s names another: %v", session, e)
		case e["type"] == "events_suppressed" && e["session"] == session:
			suppressed += int(e["suppressed"].(float64))
		}
	}
	t.Logf("%d denials in %v: %d written, %d suppressed", n, elapsed, written, suppressed)
	most := 1000 + int(100*(elapsed.Seconds()+1)) + 10
	if written+suppressed <= most {
		// The kernel's ring dropped so many that the limit was never
		// reached: a failure under SLUICE_REQUIRE_KERNEL=1 (one flood; the
		// daemon restart in the middle makes a retry a new test).
		needs.Enough(t, 1, "only %d of %d denials reached sluice: the rate limit was not exercised", written+suppressed, n)
		return
	}
	if written > most || suppressed == 0 || written+suppressed > n {
		t.Errorf("written %d + suppressed %d of %d denials: want at most %d written and the rest counted as suppressed", written, suppressed, n, most)
	}
}
