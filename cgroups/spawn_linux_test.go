// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartConfined(t *testing.T) {
	r := newTestRoot(t)
	s := newTestSession(t, r, "confined")
	cmd := startAsNobody(t, s, "sleep", "100")
	pid := cmd.Process.Pid

	cg, err := cgroupOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/" + r.Name() + "/confined"; !strings.HasSuffix(cg, want) {
		t.Errorf("/proc/%d/cgroup = %q, want it to end in %q", pid, cg, want)
	}
	procs, err := s.Procs()
	if err != nil || !slices.Contains(procs, pid) {
		t.Errorf("Procs() = %v, %v; want it to hold %d", procs, err, pid)
	}
	if populated, err := s.Populated(); err != nil || !populated {
		t.Errorf("Populated() = %v, %v; want true", populated, err)
	}

	st := procStatus(t, strconv.Itoa(pid))
	want := map[string]string{
		"NoNewPrivs": "1",
		"CapEff":     "0000000000000000",
		"CapPrm":     "0000000000000000",
		"CapInh":     "0000000000000000",
		"CapAmb":     "0000000000000000",
		"CapBnd":     "0000000000000000",
		"Uid":        "65534\t65534\t65534\t65534",
		"Gid":        "65534\t65534\t65534\t65534",
		"Groups":     "",
	}
	for k, v := range want {
		if st[k] != v {
			t.Errorf("/proc/%d/status %s = %q, want %q", pid, k, st[k], v)
		}
	}
	if st["Name"] != "sleep" {
		t.Errorf("status Name = %q: Start returned before exec", st["Name"])
	}
}

// TestStartLeavesNoTrace checks the two things Start must not leak into the
// calling process: a thread with no_new_privs or a trimmed bounding set that
// the runtime could reuse, and the cgroup directory fd.
func TestStartLeavesNoTrace(t *testing.T) {
	r := newTestRoot(t)
	s := newTestSession(t, r, "no-trace")
	startAsNobody(t, s, "sleep", "100")

	self := procStatus(t, "self") // the main thread, which Start never uses
	eventually(t, 5*time.Second, "the throwaway thread to exit", func() bool {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
			if err != nil {
				continue // exited meanwhile
			}
			text := string(b)
			if strings.Contains(text, "NoNewPrivs:\t1") || !strings.Contains(text, "CapBnd:\t"+self["CapBnd"]) {
				return false
			}
		}
		return true
	})
	if self["NoNewPrivs"] != "0" {
		t.Errorf("test process has NoNewPrivs = %s", self["NoNewPrivs"])
	}

	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && target == s.Path() {
			t.Errorf("fd %s still open on the session directory", fd.Name())
		}
	}
}

func TestGrandchildInSessionAndRemove(t *testing.T) {
	r := newTestRoot(t)
	s := newTestSession(t, r, "tree")
	cmd := startAsNobody(t, s, "sh", "-c", "sleep 100 & sleep 100")

	var procs []int
	eventually(t, 5*time.Second, "the shell's background child", func() bool {
		var err error
		procs, err = s.Procs()
		return err == nil && len(procs) >= 2
	})
	grandchildren := 0
	for _, pid := range procs {
		cg, err := cgroupOf(pid)
		if err != nil {
			continue // exited meanwhile
		}
		if !strings.HasSuffix(cg, "/"+r.Name()+"/tree") {
			t.Errorf("pid %d in %q, want the session", pid, cg)
		}
		if pid != cmd.Process.Pid {
			grandchildren++
		}
	}
	if grandchildren == 0 {
		t.Fatalf("Procs() = %v: no process besides the direct child %d", procs, cmd.Process.Pid)
	}

	// Remove before reaping the direct child: a zombie must not keep the
	// session populated.
	if err := s.Remove(5 * time.Second); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("session directory still there: %v", err)
	}
	err := waitCmd(t, cmd, 5*time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("direct child ended with %v, want SIGKILL", err)
	}
	for _, pid := range procs {
		eventually(t, 5*time.Second, "pid "+strconv.Itoa(pid)+" to be gone", func() bool {
			b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
			// The grandchild is reaped by init; until then it is a zombie ("Z").
			return err != nil || strings.Contains(string(b), ") Z ")
		})
	}
	if err := s.Remove(time.Second); err != nil {
		t.Errorf("second Remove: %v, want nil", err)
	}
	if err := s.Kill(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Kill after Remove: %v, want fs.ErrNotExist", err)
	}
}

func TestStartRefusesRoot(t *testing.T) {
	r := newTestRoot(t)
	s := newTestSession(t, r, "root")
	cmd := exec.Command("true")
	err := s.Start(cmd, SpawnOptions{UID: 0, GID: 0})
	if !errors.Is(err, ErrRootUID) || !strings.Contains(err.Error(), "cgroup.procs") {
		t.Errorf("Start as uid 0: error = %v, want ErrRootUID with the reason", err)
	}
	if cmd.Process != nil {
		t.Errorf("a process was started (pid %d)", cmd.Process.Pid)
	}
}

func TestStartRefusesUnsafeSysProcAttr(t *testing.T) {
	r := newTestRoot(t)
	s := newTestSession(t, r, "attrs")
	for name, attr := range map[string]*syscall.SysProcAttr{
		"Credential":    {Credential: &syscall.Credential{Uid: 1}},
		"UseCgroupFD":   {UseCgroupFD: true},
		"AmbientCaps":   {AmbientCaps: []uintptr{12}},
		"Pdeathsig":     {Pdeathsig: syscall.SIGKILL},
		"Ptrace":        {Ptrace: true},
		"CLONE_NEWUSER": {Cloneflags: syscall.CLONE_NEWUSER},
		"UidMappings":   {UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: nobody, Size: 1}}},
	} {
		cmd := exec.Command("true")
		cmd.SysProcAttr = attr
		if err := s.Start(cmd, SpawnOptions{UID: nobody, GID: nobody}); err == nil || !strings.Contains(err.Error(), "refusing cmd.SysProcAttr") {
			t.Errorf("%s: Start error = %v, want a refusal", name, err)
		}
		if cmd.Process != nil {
			t.Errorf("%s: a process was started", name)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
}

func TestStartKeepsOtherAttrsAndSetsid(t *testing.T) {
	r := newTestRoot(t)
	s := newTestSession(t, r, "setsid")
	cmd := exec.Command("sleep", "100")
	if err := s.Start(cmd, SpawnOptions{UID: nobody, GID: nobody, Groups: []uint32{nobody, 100}, Setsid: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		waitCmd(t, cmd, 5*time.Second)
	})
	pid := cmd.Process.Pid
	sid, err := getsid(pid)
	if err != nil || sid != pid {
		t.Errorf("getsid(%d) = %d, %v; want a new session", pid, sid, err)
	}
	if got := procStatus(t, strconv.Itoa(pid))["Groups"]; got != "100 65534" {
		t.Errorf("Groups = %q, want \"100 65534\"", got)
	}
}

func TestStartMissingSession(t *testing.T) {
	r := newTestRoot(t)
	s := newTestSession(t, r, "gone")
	if err := s.Remove(time.Second); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	if err := s.Start(cmd, SpawnOptions{UID: nobody, GID: nobody}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Start in a removed session: error = %v, want fs.ErrNotExist", err)
	}
	if cmd.Process != nil {
		t.Error("a process was started outside any session")
	}
}

func getsid(pid int) (int, error) {
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(sid), nil
}
