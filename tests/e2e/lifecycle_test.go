// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireSluice is newWorld for tests that need no network: root, and a
// quiescent instance afterwards.
func requireSluice(t *testing.T) {
	t.Helper()
	requireRoot(t)
	t.Cleanup(func() { assertQuiescent(t) })
}

// TestExitStatus: sluice exits with its command's status, or 128+signal
// when the command was killed by a signal.
func TestExitStatus(t *testing.T) {
	requireSluice(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"exit 125", 125},
		{"kill -KILL $$", 128 + int(syscall.SIGKILL)},
	} {
		if run := runSluice(t, nil, runArgs(nil, nil, "sh", "-c", tc.script)...); run.Code != tc.want {
			t.Errorf("sh -c %q: sluice exited %d, want %d\n%v", tc.script, run.Code, tc.want, run)
		}
	}
}

// TestCommandRunsConfinedAsUser: the command runs as the --user ids, with
// no_new_privs, no capabilities, inside a session cgroup of the instance.
func TestCommandRunsConfinedAsUser(t *testing.T) {
	requireSluice(t)
	run := runSluice(t, nil, runArgs(nil, nil, "sh", "-c", "id -u; id -g; cat /proc/self/status; cat /proc/self/cgroup")...)
	if run.Code != 0 {
		t.Fatalf("%v", run)
	}
	lines := strings.Split(run.Stdout, "\n")
	if len(lines) < 2 || lines[0] != "65534" || lines[1] != "65534" {
		t.Errorf("command ran as uid/gid %q, want 65534/65534", lines[:min(2, len(lines))])
	}
	for _, want := range []string{
		"NoNewPrivs:\t1",
		"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000",
	} {
		if !strings.Contains(run.Stdout, want) {
			t.Errorf("command's /proc/self/status lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^0::/` + regexp.QuoteMeta(instance) + `/[^/\n]+$`).MatchString(run.Stdout) {
		t.Errorf("command not in a session cgroup under /%s:\n%s", instance, run.Stdout)
	}
}

// TestSignalForwarding: SIGTERM and SIGINT (sluice's stdin is not a
// terminal here) sent to sluice reach the command, whose exit status
// sluice returns.
func TestSignalForwarding(t *testing.T) {
	requireSluice(t)
	for _, tc := range []struct {
		sig  syscall.Signal
		trap string
		want int
	}{
		{syscall.SIGTERM, "TERM", 42},
		{syscall.SIGINT, "INT", 43},
		{syscall.SIGHUP, "HUP", 44},
	} {
		t.Run(tc.trap, func(t *testing.T) {
			ready := filepath.Join(sharedDir(t), "ready")
			script := fmt.Sprintf(`trap "exit %d" %s; touch %s; sleep 10 & wait`, tc.want, tc.trap, shq(ready))
			proc, wait := startSluice(t, nil, 8*time.Second, runArgs(nil, nil, "sh", "-c", script)...)
			waitFile(t, ready)
			signalled := time.Now()
			if err := proc.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			run := wait()
			if run.Code != tc.want {
				t.Errorf("sluice exited %d after %v, want the command's %d\n%v", run.Code, tc.sig, tc.want, run)
			}
			if d := time.Since(signalled); d > 5*time.Second {
				t.Errorf("sluice took %v to exit after %v", d, tc.sig)
			}
		})
	}
}

// TestLeftoversKilled: processes the command leaves behind die with the
// session.
func TestLeftoversKilled(t *testing.T) {
	requireSluice(t)
	run := runSluice(t, nil, runArgs(nil, nil, "sh", "-c", "sleep 1000 & echo $!")...)
	if run.Code != 0 {
		t.Fatalf("%v", run)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(run.Stdout))
	if err != nil {
		t.Fatalf("no pid printed: %v", run)
	}
	alive := func() bool { return processAlive(pid) }
	t.Cleanup(func() {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); alive() && bytes.HasPrefix(b, []byte("sleep\x001000")) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if !waitFor(func() bool { return !alive() }) {
		t.Errorf("the command's background process %d is still alive %v after sluice returned", pid, waitBound)
	}
}

// TestRefusesRoot: sluice never runs the command as uid 0 and runs
// nothing when asked to.
func TestRefusesRoot(t *testing.T) {
	requireSluice(t)
	for _, user := range []string{"0", "0:0", "root", "root:65534"} {
		mark := filepath.Join(sharedDir(t), "ran")
		run := runSluice(t, nil, "run", "--user", user, "--", "sh", "-c", "touch "+shq(mark))
		if run.Code != 125 {
			t.Errorf("--user %s: exit %d, want 125\n%v", user, run.Code, run)
		}
		if !strings.Contains(run.Stderr, "root") {
			t.Errorf("--user %s: the error does not say why: %q", user, run.Stderr)
		}
		if exists(mark) {
			t.Errorf("--user %s: the command ran", user)
		}
	}
}

// TestCommandNotFound: 127, like a shell.
func TestCommandNotFound(t *testing.T) {
	requireSluice(t)
	run := runSluice(t, nil, runArgs(nil, nil, "sluice-e2e-no-such-command")...)
	if run.Code != 127 {
		t.Errorf("exit %d, want 127\n%v", run.Code, run)
	}
	if !strings.Contains(run.Stderr, "sluice-e2e-no-such-command") {
		t.Errorf("the error does not name the command: %q", run.Stderr)
	}
}

// TestMalformedAllowlist: a bad entry in the file is an error naming it,
// and nothing runs.
func TestMalformedAllowlist(t *testing.T) {
	requireSluice(t)
	dir := sharedDir(t)
	for _, tc := range []struct {
		name, content, entry string
	}{
		{"url", `{"allowed_hosts": ["203.0.113.10", "https://x.example/"]}`, "https://x.example/"},
		{"bad-cidr", `{"allowed_hosts": ["203.0.113.0/33"]}`, "203.0.113.0/33"},
		{"port", `{"allowed_hosts": ["203.0.113.10:443"]}`, "203.0.113.10:443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name+".json")
			if err := os.WriteFile(file, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			mark := filepath.Join(dir, tc.name+".ran")
			run := runSluice(t, nil, runArgs(nil, []string{"--allowlist", file}, "sh", "-c", "touch "+shq(mark))...)
			if run.Code != 125 {
				t.Errorf("exit %d, want 125\n%v", run.Code, run)
			}
			if !strings.Contains(run.Stderr, tc.entry) {
				t.Errorf("the error does not name the entry %q: %q", tc.entry, run.Stderr)
			}
			if exists(mark) {
				t.Error("the command ran despite the malformed allowlist")
			}
		})
	}
	// The same entry through --allow.
	mark := filepath.Join(dir, "allow.ran")
	run := runSluice(t, nil, runArgs([]string{"https://x.example/"}, nil, "sh", "-c", "touch "+shq(mark))...)
	if run.Code != 125 || !strings.Contains(run.Stderr, "https://x.example/") || exists(mark) {
		t.Errorf("--allow https://x.example/: want exit 125 naming the entry and nothing run\n%v", run)
	}
}

// TestLimits: --pids-max and --memory-max apply where the cgroup2
// controllers are available, and otherwise make sluice refuse (125) with
// a message saying so, without running the command.
func TestLimits(t *testing.T) {
	requireSluice(t)
	b, err := os.ReadFile(filepath.Join(cgMount, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	available := strings.Fields(string(b))
	for _, tc := range []struct {
		controller, flag, value, file, want string
	}{
		{"pids", "--pids-max", "17", "pids.max", "17"},
		{"memory", "--memory-max", "64M", "memory.max", strconv.Itoa(64 << 20)},
	} {
		t.Run(tc.controller, func(t *testing.T) {
			mark := filepath.Join(sharedDir(t), "ran")
			script := fmt.Sprintf(`touch %s; p=$(sed -n 's/^0:://p' /proc/self/cgroup); cat %s"$p"/%s`, shq(mark), shq(cgMount), tc.file)
			run := runSluice(t, nil, runArgs(nil, []string{tc.flag, tc.value}, "sh", "-c", script)...)
			if slices.Contains(available, tc.controller) {
				t.Logf("the %s controller is available in cgroup2: the limit must apply", tc.controller)
				if run.Code != 0 || strings.TrimSpace(run.Stdout) != tc.want {
					t.Errorf("%s %s: want exit 0 and %s = %s\n%v", tc.flag, tc.value, tc.file, tc.want, run)
				}
				return
			}
			t.Logf("the %s controller is not available in cgroup2 (%q): sluice must refuse", tc.controller, available)
			if run.Code != 125 {
				t.Errorf("%s %s without the %s controller: exit %d, want 125\n%v", tc.flag, tc.value, tc.controller, run.Code, run)
			}
			if !strings.Contains(run.Stderr, `"`+tc.controller+`"`) || !strings.Contains(run.Stderr, "unavailable") {
				first, _, _ := strings.Cut(run.Stderr, "\n")
				t.Errorf("the error does not say the %s controller is unavailable: %q", tc.controller, first)
			}
			if exists(mark) {
				t.Error("the command ran without its limit")
			}
		})
	}
}

// TestCleanupAndCheck: a finished run leaves no session cgroup and no map
// entry; `sluice status` reports the state; `sluice cleanup` removes the
// pins, the cgroup root and the state directory; `sluice check` passes and
// lists each check; and a run afterwards sets everything up again.
func TestCleanupAndCheck(t *testing.T) {
	w := newWorld(t)
	if run := runSluice(t, w, runArgs(defaultPolicy, nil, "true")...); run.Code != 0 {
		t.Fatalf("%v", run)
	}
	assertQuiescent(t)
	for _, p := range []string{pinDir(), cgRoot()} {
		if !exists(p) {
			t.Errorf("%s does not exist after a run", p)
		}
	}
	if run := runSluice(t, nil, "status"); run.Code != 0 || !strings.Contains(run.Stdout, "sessions: 0") || !strings.Contains(run.Stdout, "datapath: pinned at "+pinDir()) {
		t.Errorf("sluice status after a run: want the pinned datapath and 0 sessions\n%v", run)
	}

	if run := runSluice(t, nil, "cleanup"); run.Code != 0 {
		t.Errorf("sluice cleanup: %v", run)
	}
	for _, p := range []string{pinDir(), cgRoot(), "/run/" + instance} {
		if exists(p) {
			t.Errorf("%s still exists after sluice cleanup", p)
		}
	}
	if run := runSluice(t, nil, "cleanup"); run.Code != 0 {
		t.Errorf("sluice cleanup with nothing to clean: %v", run)
	}
	run := runSluice(t, nil, "status")
	if run.Code != 0 || !strings.Contains(run.Stdout, "not loaded") || !strings.Contains(run.Stdout, "sessions: none") {
		t.Errorf("sluice status after cleanup: want nothing loaded and no sessions\n%v", run)
	}
	if exists(pinDir()) || exists(cgRoot()) {
		t.Errorf("sluice status created %s or %s", pinDir(), cgRoot())
	}

	before := checkCgroups(t)
	run = runSluice(t, nil, "check")
	if run.Code != 0 {
		t.Errorf("sluice check: exit %d, want 0 on this machine\n%v", run.Code, run)
	}
	for _, name := range []string{"privileges", "bpf syscall", "BTF", "cgroup2", "bpffs", "datapath", "landlock"} {
		if !regexp.MustCompile(`(?m)^(ok|warn) +` + regexp.QuoteMeta(name) + ` `).MatchString(run.Stdout) {
			t.Errorf("sluice check does not list %q as ok or warn:\n%s", name, run.Stdout)
		}
	}
	// Which cgroup placement applies: systemd or not, hybrid or not.
	placement := regexp.MustCompile(`(?m)^ok +session cgroups +(.*)$`).FindStringSubmatch(run.Stdout)
	if placement == nil {
		t.Errorf("sluice check does not say where sessions live:\n%s", run.Stdout)
	} else {
		_, err := os.Stat("/run/systemd/system")
		if systemd := err == nil; strings.Contains(placement[1], "PID 1 is systemd") != systemd {
			t.Errorf("session cgroups: %q, but /run/systemd/system exists: %v", placement[1], systemd)
		}
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		if hybrid := strings.Contains(string(mi), " - cgroup "); strings.Contains(placement[1], "hybrid layout") != hybrid {
			t.Errorf("session cgroups: %q, but cgroup v1 mounted: %v", placement[1], hybrid)
		}
	}
	// How to confine a whole container here: this machine's cgroupfs root
	// and Docker's cgroupfs driver.
	if c := regexp.MustCompile(`(?m)^(ok|warn|FAIL) +containers +(.*)$`).FindStringSubmatch(run.Stdout); c == nil {
		t.Errorf("sluice check has no containers line:\n%s", run.Stdout)
	} else if !strings.Contains(c[2], "docker run --cgroup-parent=") || !strings.Contains(c[2], "fenced") {
		t.Errorf("containers: %q does not say which --cgroup-parent confines a container and that the other form is fenced", c[2])
	}
	if !strings.Contains(run.Stdout, "kernel enforcement is possible") {
		t.Errorf("sluice check does not conclude that enforcement is possible:\n%s", run.Stdout)
	}
	if after := checkCgroups(t); len(after) > len(before) {
		t.Errorf("sluice check left cgroups behind: %v", after)
	}
	if exists(pinDir()) || exists(cgRoot()) {
		t.Errorf("sluice check created %s or %s", pinDir(), cgRoot())
	}

	// Everything comes back on the next run, and goes again.
	if run := runSluice(t, w, runArgs(defaultPolicy, nil, "true")...); run.Code != 0 {
		t.Errorf("sluice run after cleanup: %v", run)
	}
}

// checkCgroups lists sluice check's throwaway cgroups under the mount.
func checkCgroups(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(cgMount, "sluice-check-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRunWallTime reports what `sluice run -- true` costs over bare true;
// it fails only if the overhead is absurd (the target is 100 ms).
func TestRunWallTime(t *testing.T) {
	requireSluice(t)
	runSluice(t, nil, runArgs(nil, nil, "true")...) // warm: load and pin
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	var bare, confined []time.Duration
	for range 5 {
		start := time.Now()
		if err := exec.CommandContext(ctx, "true").Run(); err != nil {
			t.Fatal(err)
		}
		bare = append(bare, time.Since(start))
		run := runSluice(t, nil, runArgs(nil, nil, "true")...)
		if run.Code != 0 {
			t.Fatalf("%v", run)
		}
		confined = append(confined, run.Elapsed)
	}
	slices.Sort(bare)
	slices.Sort(confined)
	overhead := confined[2] - bare[2]
	t.Logf("median: sluice run -- true %v, true %v: %v added (target < 100ms)", confined[2], bare[2], overhead)
	if overhead > 2*time.Second {
		t.Errorf("sluice run -- true adds %v", overhead)
	}
}

// TestCleanupKillsOrphans: `sluice cleanup` also removes a session whose
// sluice was SIGKILLed while its command still runs: the command is
// killed, and the pins and the cgroup root are gone.
func TestCleanupKillsOrphans(t *testing.T) {
	requireSluice(t)
	dir := sharedDir(t)
	pidFile := filepath.Join(dir, "pid")
	script := fmt.Sprintf("echo $$ > %s.tmp && mv %s.tmp %s; while :; do sleep 0.05; done", shq(pidFile), shq(pidFile), shq(pidFile))
	proc, wait := startSluice(t, nil, runTimeout, runArgs(nil, nil, "sh", "-c", script)...)
	waitFile(t, pidFile)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file holds %q", b)
	}
	dirs := sessionDirs(t)
	if len(dirs) != 1 {
		t.Fatalf("want one session, have %v", dirs)
	}
	t.Cleanup(func() {
		if exists(dirs[0]) {
			_ = os.WriteFile(filepath.Join(dirs[0], "cgroup.kill"), []byte("1"), 0)
		}
	})
	if err := proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait()
	if !processAlive(pid) {
		t.Fatalf("the command %d died with sluice; the test needs an orphan", pid)
	}

	if run := runSluice(t, nil, "cleanup"); run.Code != 0 {
		t.Errorf("sluice cleanup with an orphaned session: %v", run)
	}
	if !waitFor(func() bool { return !processAlive(pid) }) {
		t.Errorf("the orphaned command %d survived sluice cleanup", pid)
	}
	for _, p := range []string{dirs[0], cgRoot(), pinDir()} {
		if exists(p) {
			t.Errorf("%s still exists after sluice cleanup", p)
		}
	}
}

// processAlive reports whether pid exists and is not a zombie (a zombie is
// dead; it waits only for its reaper, and pid 1 here may never reap).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}
