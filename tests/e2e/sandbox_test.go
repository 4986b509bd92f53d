// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

// Issue 9, the process half: a confined command cannot reach sideways
// into a process of the same user outside its session. Each attack runs
// three ways: unconfined (the twin that shows it works on this machine),
// under sluice with --share-processes (the twin that shows the datapath
// alone does not stop it: the victim's sockets are judged by no session),
// and under sluice's default sandbox, where it must fail and the world
// must record nothing.

// victim is a same-uid process outside any session.
type victim struct {
	pid      int
	udp, tcp string // hold: descriptor numbers of its sockets
}

// startHolder starts `probe hold` as uid 65534 in the client namespace,
// unconfined, and waits for it to report its sockets.
func startHolder(t *testing.T, w *world.World) victim {
	t.Helper()
	out := filepath.Join(sharedDir(t), "hold")
	cmd := exec.Command(probeBin(t), "-timeout", "60s", "hold", out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody.Credential}
	startVictim(t, w, cmd)
	waitFile(t, out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		t.Fatalf("hold wrote %q", b)
	}
	return victim{pid: atoi(t, f[0]), udp: f[1], tcp: f[2]}
}

// startSleeper starts `sleep 60` as uid 65534 in the client namespace,
// unconfined: a sleeping process to inject into.
func startSleeper(t *testing.T, w *world.World) victim {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody.Credential}
	startVictim(t, w, cmd)
	// Wait until it has exec'd and sleeps, so an attach finds sleep.
	if !waitFor(func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		return err == nil && strings.Contains(string(b), "(sleep) S")
	}) {
		t.Fatalf("sleep %d did not start sleeping", cmd.Process.Pid)
	}
	return victim{pid: cmd.Process.Pid}
}

func startVictim(t *testing.T, w *world.World, cmd *exec.Cmd) {
	t.Helper()
	if err := w.StartInClient(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// writableAddr is the start of a writable mapping of pid ([stack]
// preferred), in hex, read by the test (root, outside any session).
func writableAddr(t *testing.T, pid int) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var first string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || !strings.HasPrefix(fields[1], "rw") {
			continue
		}
		start, _, _ := strings.Cut(fields[0], "-")
		if len(fields) >= 6 && fields[5] == "[stack]" {
			return start
		}
		if first == "" {
			first = start
		}
	}
	if first == "" {
		t.Fatalf("no writable mapping in /proc/%d/maps", pid)
	}
	return first
}

// sideways runs the probe the three ways and checks each; args gives
// its arguments for each way (a victim may not survive an attack that
// worked), the victim's pid second. f selects the world packets the attack
// would cause (nil: it causes none). access is how sluice names the
// refused access in its line and audit event ("pidfd_getfd", "signal").
func sideways(t *testing.T, w *world.World, f func(time.Time) world.Filter, access string, args func(t *testing.T) []string) {
	t.Helper()
	world.EnableKernelAudit(t)
	t.Run("unconfined", func(t *testing.T) {
		start := time.Now()
		r := w.RunProbe(t, nobody, args(t)...)
		if !r.OK {
			t.Fatalf("the attack fails even without sluice, so the test proves nothing: %v", r)
		}
		if f != nil {
			wantArrival(t, w, f(start), "the unconfined attack")
		}
	})
	t.Run("share-processes", func(t *testing.T) {
		start := time.Now()
		r, _ := confinedProbe(t, w, defaultPolicy, []string{"--share-processes"}, args(t)...)
		if !r.OK {
			t.Fatalf("with --share-processes the attack failed: %v", r)
		}
		if f != nil {
			wantArrival(t, w, f(start), "the attack from a session without process isolation")
		}
	})
	t.Run("sandboxed", func(t *testing.T) {
		start := time.Now()
		log := filepath.Join(t.TempDir(), "audit.jsonl")
		a := args(t)
		r, run := confinedProbe(t, w, defaultPolicy, []string{"--audit-log", log}, a...)
		if r.OK || (r.Errno != "EPERM" && r.Errno != "EACCES" && r.Errno != "ENOENT" && r.Errno != "ESRCH") {
			t.Errorf("from a sandboxed session: %v, want a refusal", r)
		}
		if f != nil {
			w.AssertNothingArrived(t, f(start), settle)
		}
		wantSandboxDenial(t, run, log, access, a[1])
	})
}

// wantSandboxDenial checks that a refusal by the session's sandbox was
// explained: a line on sluice's stderr ("sluice: denied probe[42] ->
// pidfd_getfd of probe[41]: outside the session") and a sandbox_denied
// event in the audit log naming the access and the victim's pid.
func wantSandboxDenial(t *testing.T, run runResult, log, access, victim string) {
	t.Helper()
	line := regexp.MustCompile(`(?m)^sluice: denied \S+\[\d+\] -> ` + regexp.QuoteMeta(access) + ` (of|to) \S+\[` + victim + `\]: outside the session$`)
	if !line.MatchString(run.Stderr) {
		t.Errorf("no line explains the refused %s of %s:\n%s", access, victim, run.Stderr)
	}
	found := false
	for _, e := range world.ReadAuditLog(t, log) {
		if e["type"] == "sandbox_denied" && e["access"] == access && fmt.Sprint(e["target_pid"]) == victim &&
			e["reason"] == "outside the session" && e["session"] != nil {
			found = true
		}
	}
	if !found {
		b, _ := os.ReadFile(log)
		t.Errorf("no sandbox_denied event for the refused %s of %s in the audit log:\n%s", access, victim, b)
	}
}

// TestSidewaysPidfdGetfd: taking an outside process's socket with
// pidfd_getfd and sending with it.
func TestSidewaysPidfdGetfd(t *testing.T) {
	w := newWorld(t)
	tcpPort := w.ListenTCP(t, world.DeniedV4)
	udpPort := w.ListenUDP(t, world.DeniedV4)
	t.Run("tcp", func(t *testing.T) {
		sideways(t, w, func(s time.Time) world.Filter { return arrived(s, world.DeniedV4, tcpPort) }, "pidfd_getfd", func(t *testing.T) []string {
			v := startHolder(t, w)
			return []string{"getfd", strconv.Itoa(v.pid), v.tcp, "tcp", world.DeniedV4.String(), port(tcpPort)}
		})
	})
	t.Run("udp", func(t *testing.T) {
		sideways(t, w, func(s time.Time) world.Filter { return arrived(s, world.DeniedV4, udpPort) }, "pidfd_getfd", func(t *testing.T) []string {
			v := startHolder(t, w)
			return []string{"getfd", strconv.Itoa(v.pid), v.udp, "udp", world.DeniedV4.String(), port(udpPort)}
		})
	})
}

// TestSidewaysPtraceInject: making a sleeping outside process send a
// datagram itself.
func TestSidewaysPtraceInject(t *testing.T) {
	w := newWorld(t)
	world.EnableKernelAudit(t)
	udpPort := w.ListenUDP(t, world.DeniedV4)
	// Each way gets its own victim: an injection leaves it running, but
	// a refused one must not depend on an earlier success.
	for _, way := range []string{"unconfined", "share-processes", "sandboxed"} {
		t.Run(way, func(t *testing.T) {
			v := startSleeper(t, w)
			args := []string{"ptrace-inject", strconv.Itoa(v.pid), world.DeniedV4.String(), port(udpPort)}
			start := time.Now()
			var r world.ProbeResult
			var run runResult
			log := filepath.Join(t.TempDir(), "audit.jsonl")
			switch way {
			case "unconfined":
				r = w.RunProbe(t, nobody, args...)
			case "share-processes":
				r, _ = confinedProbe(t, w, defaultPolicy, []string{"--share-processes"}, args...)
			default:
				r, run = confinedProbe(t, w, defaultPolicy, []string{"--audit-log", log}, args...)
			}
			if strings.Contains(r.Error, "only on amd64") {
				needs.Absent(t, "ptrace-inject is written for amd64 only")
			}
			if way == "sandboxed" {
				if r.OK || r.Stage != "ptrace" {
					t.Errorf("ptrace from a sandboxed session: %v, want a refusal at attach", r)
				}
				w.AssertNothingArrived(t, arrived(start, world.DeniedV4, udpPort), settle)
				wantSandboxDenial(t, run, log, "ptrace", strconv.Itoa(v.pid))
				return
			}
			if !r.OK || r.Sent == 0 {
				t.Fatalf("injection (%s) failed, so the test proves nothing: %v", way, r)
			}
			wantArrival(t, w, arrived(start, world.DeniedV4, udpPort), "the injected datagram")
		})
	}
}

// TestSidewaysMemoryWrites: process_vm_writev and /proc/PID/mem into an
// outside process, and signals to it.
func TestSidewaysMemoryWrites(t *testing.T) {
	w := newWorld(t)
	v := startSleeper(t, w)
	addr := writableAddr(t, v.pid)
	same := func(args ...string) func(*testing.T) []string { return func(*testing.T) []string { return args } }
	t.Run("process_vm_writev", func(t *testing.T) {
		// The probe reads the bytes before it writes them back: the read
		// is what is refused.
		sideways(t, w, nil, "process_vm_readv", same("vm-write", strconv.Itoa(v.pid), addr))
	})
	t.Run("proc-mem", func(t *testing.T) { sideways(t, w, nil, "/proc files", same("mem-write", strconv.Itoa(v.pid), addr)) })
	t.Run("signal", func(t *testing.T) { sideways(t, w, nil, "signal", same("signal", strconv.Itoa(v.pid))) })
}

// TestSessionSeesOnlyItself: ps in a session lists the session's
// processes only, and /proc has no entry for an outside process of the
// same user; with --share-processes it does (the twin).
func TestSessionSeesOnlyItself(t *testing.T) {
	w := newWorld(t)
	v := startSleeper(t, w)
	script := fmt.Sprintf(`ps -e -o pid=,comm=; echo ---; ls -d /proc/%d 2>&1 || true`, v.pid)
	run := shellCommand(t, w, nil, nil, script)
	if run.Code != 0 {
		t.Fatalf("ps in a session: %v", run)
	}
	psOut, lsOut, _ := strings.Cut(run.Stdout, "---")
	var comms []string
	for l := range strings.SplitSeq(strings.TrimSpace(psOut), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		if f[0] == strconv.Itoa(v.pid) {
			t.Errorf("ps in the session lists the outside process %d", v.pid)
		}
		comms = append(comms, f[1])
	}
	if len(comms) != 2 || !strings.Contains(strings.Join(comms, " "), "ps") {
		t.Errorf("ps in the session lists %q, want just the shell and ps", comms)
	}
	if !strings.Contains(lsOut, "No such file") {
		t.Errorf("/proc/%d is visible in the session: %q", v.pid, lsOut)
	}
	twin := shellCommand(t, w, nil, []string{"--share-processes"}, script)
	if !strings.Contains(twin.Stdout, strconv.Itoa(v.pid)+" sleep") {
		t.Errorf("with --share-processes the outside sleep %d is not listed, so the test proves nothing: %v", v.pid, twin)
	}
}

// TestSessionToolsWork: inside the session, job control, kill, strace
// and gdb work on the session's own processes, and the exit status of the
// command passes through.
func TestSessionToolsWork(t *testing.T) {
	w := newWorld(t)
	run := shellCommand(t, w, nil, nil, `sleep 30 & p=$!; kill $p; wait $p; echo "bg=$?"; exit 9`)
	if run.Code != 9 || !strings.Contains(run.Stdout, "bg=143") {
		t.Errorf("kill of a background job / exit status: want bg=143 and exit 9: %v", run)
	}
	if st, err := exec.LookPath("strace"); err == nil {
		run := shellCommand(t, w, nil, nil, st+` -f -e trace=execve sh -c 'echo traced' 2>&1`)
		if run.Code != 0 || !strings.Contains(run.Stdout, "execve(") || !strings.Contains(run.Stdout, "traced") {
			t.Errorf("strace of the session's own child: %v", run)
		}
	} else {
		t.Log("strace not installed: skipped")
	}
	if gdb, err := exec.LookPath("gdb"); err == nil {
		run := shellCommand(t, w, nil, nil, `sleep 30 & p=$!; `+gdb+` -batch -nx -p $p -ex 'info inferiors' 2>&1; kill $p`)
		if !strings.Contains(run.Stdout, "process ") || strings.Contains(run.Stdout, "ptrace: Operation not permitted") {
			t.Errorf("gdb attach to the session's own child: %v", run)
		}
	} else {
		t.Log("gdb not installed: skipped")
	}
}

// TestCommonToolsInSession: git on a local repository, python and node
// (when installed) work in a sandboxed session.
func TestCommonToolsInSession(t *testing.T) {
	requireSluice(t)
	dir := sharedDir(t)
	script := fmt.Sprintf(`set -e
cd %s
export HOME=%s GIT_CONFIG_NOSYSTEM=1
git init -q repo && cd repo
git -c user.name=t -c user.email=t@example.test commit -q --allow-empty -m one
git log --oneline | wc -l
`, shq(dir), shq(dir))
	for _, tool := range []struct{ bin, line string }{
		{"/usr/bin/python3", `/usr/bin/python3 -c 'import os; print("py", os.getpid() > 0)'`},
		{"/usr/bin/node", `/usr/bin/node -e 'console.log("node", process.pid > 0)'`},
	} {
		if _, err := os.Stat(tool.bin); err == nil {
			script += tool.line + "\n"
		}
	}
	run := shellCommand(t, nil, nil, nil, script)
	if run.Code != 0 || !strings.HasPrefix(strings.TrimSpace(run.Stdout), "1") {
		t.Fatalf("git in a session: %v", run)
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil && !strings.Contains(run.Stdout, "py True") {
		t.Errorf("python in a session: %v", run)
	}
	if _, err := os.Stat("/usr/bin/node"); err == nil && !strings.Contains(run.Stdout, "node true") {
		t.Errorf("node in a session: %v", run)
	}
}
