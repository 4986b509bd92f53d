// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inCgroup runs a shell snippet in cgroup dir and a fresh network
// namespace (see inSession).
func inCgroup(t *testing.T, dir, script string) string {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := exec.Command("unshare", "-n", "bash", "-c", "ip link set lo up; "+script)
	cmd.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	return out.String()
}

// TestAliasGivesDescendantsTheSession: a cgroup made below an aliased
// parent after the alias (as an engine makes a build step's) is judged by
// the target session's rules from its first connect, its refusals are the
// session's events and counts; a cgroup with a session of its own below
// the alias keeps its own; without the alias, or once the target session
// is removed, the descendant has loopback only.
func TestAliasGivesDescendantsTheSession(t *testing.T) {
	f := newFixture(t)
	parent := filepath.Join(f.root, "build")
	step := filepath.Join(parent, "step", "inner")
	own := filepath.Join(parent, "own")
	for _, d := range []string{step, own} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range []string{step, filepath.Dir(step), own} {
			if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
				for _, p := range strings.Fields(string(b)) {
					pid, _ := strconv.Atoi(p)
					unix.Kill(pid, unix.SIGKILL)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
		for _, d := range []string{step, filepath.Dir(step), own, parent} {
			os.Remove(d)
		}
	})
	r, err := f.dp.AddSession(f.cgid, SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := f.dp.AddCIDRs(f.cgid, []netip.Prefix{netip.MustParsePrefix("203.0.113.0/25")}); err != nil {
		t.Fatal(err)
	}
	const allowed, denied = "exec 3<>/dev/tcp/203.0.113.7/9", "exec 3<>/dev/tcp/203.0.113.200/9"
	// Without an alias: the step has no session, loopback only.
	if out := inCgroup(t, step, allowed); !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("before the alias, the step to the session's allowed address: %q, want EPERM", out)
	}
	pid, err := cgroupID(parent)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.dp.AddAlias(pid, f.cgid); err != nil {
		t.Fatal(err)
	}
	before, err := f.dp.Counters(f.cgid)
	if err != nil {
		t.Fatal(err)
	}
	if out := inCgroup(t, step, allowed); !strings.Contains(out, "Network is unreachable") {
		t.Errorf("the step to the session's allowed address: %q, want it through the datapath", out)
	}
	if out := inCgroup(t, step, denied); !strings.Contains(out, "Operation not permitted") {
		t.Errorf("the step to a denied address: %q, want EPERM", out)
	}
	// UDP sendmsg is judged the same way.
	if out := inCgroup(t, step, "echo x > /dev/udp/203.0.113.201/9"); !strings.Contains(out, "Operation not permitted") {
		t.Errorf("the step's UDP to a denied address: %q, want EPERM", out)
	}
	after, err := f.dp.Counters(f.cgid)
	if err != nil {
		t.Fatal(err)
	}
	if after.Allowed <= before.Allowed || after.Denied < before.Denied+2 {
		t.Errorf("the session's counters %+v -> %+v: the step's connects are not counted as the session's", before, after)
	}
	r.SetDeadline(time.Now().Add(2 * time.Second))
	rec, err := r.Read()
	if err != nil {
		t.Fatalf("the session's events: %v", err)
	}
	if e, err := ParseEvent(rec.RawSample); err != nil || e.Cgroup != f.cgid || e.Comm != "bash" {
		t.Errorf("the step's refusal as an event: %+v %v, want one of session %d", e, err, f.cgid)
	}

	// A cgroup below the alias with a session of its own keeps its own.
	oid, err := cgroupID(own)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := f.dp.AddSession(oid, SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	defer f.dp.RemoveSession(oid, nil)
	if out := inCgroup(t, own, allowed); !strings.Contains(out, "Operation not permitted") {
		t.Errorf("a session of its own below the alias: %q, want its own rules (EPERM)", out)
	}

	// The session's end removes the alias with it.
	if err := f.dp.RemoveSession(f.cgid, nil); err != nil {
		t.Fatal(err)
	}
	if a, err := f.dp.Aliases(); err != nil || a[pid] != 0 {
		t.Errorf("aliases after the session's removal: %v %v", a, err)
	}
	if out := inCgroup(t, step, allowed); !strings.Contains(out, "Operation not permitted") {
		t.Errorf("after the session's end, the step: %q, want loopback only", out)
	}
	if out := inCgroup(t, step, "exec 3<>/dev/tcp/127.0.0.1/9"); !strings.Contains(out, "Connection refused") {
		t.Errorf("the step to loopback: %q", out)
	}
	if err := f.dp.AddAlias(pid, 0); err == nil {
		t.Error("an alias to no cgroup was accepted")
	}
}
