// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
)

// TestAliasConfinesWhatIsMadeBelowIt: a cgroup an engine makes below a
// session's alias after the alias exists (a build step) is the session's
// from its first connect: its allowed address gets through, another is
// refused; the alias's Close kills what runs below it and removes the
// whole tree, and the session's own cgroup is untouched.
func TestAliasConfinesWhatIsMadeBelowIt(t *testing.T) {
	e := testEnforcer(t, "sluice-alias")
	p, err := allowlist.Parse([]byte(`{"allowed_hosts": ["203.0.113.0/25"]}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.NewSession(Options{Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := e.NewAlias(s)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = a.Close(5 * time.Second)
		}
	}()
	if !strings.HasPrefix(a.Name(), s.Name()+".alias-") {
		t.Errorf("alias name %q: want it to start with its session's %q", a.Name(), s.Name())
	}
	// What an engine does: its own cgroups below the parent, made after
	// the alias, a process started straight into one.
	step := filepath.Join(a.Path(), "0123456789ab", "inner")
	if err := os.MkdirAll(step, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(script string) string {
		fd, err := unix.Open(step, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		cmd := exec.Command("unshare", "-n", "bash", "-c", "ip link set lo up; "+script)
		cmd.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	if out := run("exec 3<>/dev/tcp/203.0.113.7/9"); !strings.Contains(out, "Network is unreachable") {
		t.Errorf("the step to the session's allowed address: %q, want it through the datapath", out)
	}
	if out := run("exec 3<>/dev/tcp/203.0.113.200/9"); !strings.Contains(out, "Operation not permitted") {
		t.Errorf("the step to a denied address: %q, want EPERM", out)
	}

	// A step still running when the alias closes is killed with its tree.
	fd, err := unix.Open(step, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("sleep", "60")
	sleep.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	err = sleep.Start()
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = sleep.Wait(); close(exited) }()
	t.Cleanup(func() { _ = sleep.Process.Kill(); <-exited })
	closed = true
	if err := a.Close(5 * time.Second); err != nil {
		t.Errorf("close the alias: %v", err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("a process below the alias outlived its Close")
	}
	if _, err := os.Stat(a.Path()); !os.IsNotExist(err) {
		t.Errorf("the alias's cgroup after Close: %v", err)
	}
	if _, err := os.Stat(s.Path()); err != nil {
		t.Errorf("the session's cgroup after its alias's Close: %v", err)
	}
	if al, err := e.Datapath().Aliases(); err != nil || len(al) != 0 {
		t.Errorf("aliases after Close: %v %v", al, err)
	}

	// An alias whose owner died (its lock let go, nothing closed it) is
	// removed by the next Reclaim, cgroup, lock and datapath entry.
	dead, err := e.NewAlias(s)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := e.NewAlias(s)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close(time.Second)
	dead.lock.Close()
	if errs := e.Reclaim(); len(errs) != 0 {
		t.Errorf("reclaim: %v", errs)
	}
	if _, err := os.Stat(dead.Path()); !os.IsNotExist(err) {
		t.Errorf("a dead alias's cgroup after Reclaim: %v", err)
	}
	al, err := e.Datapath().Aliases()
	if err != nil || al[dead.id] != 0 || al[kept.id] != s.ID() {
		t.Errorf("aliases after Reclaim: %v %v: want the live one alone", al, err)
	}
	if _, err := os.Stat(kept.Path()); err != nil {
		t.Errorf("a live alias's cgroup after Reclaim: %v", err)
	}
}
