// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

// Issue 9 through the daemon: sessions it starts get the sandbox too, and
// their file system is the caller's view, not the daemon's.

const secretMarker = "SLUICE-SECRET-"

// TestDaemonSessionUsesCallersView: the daemon runs in a mount namespace of
// its own (as under systemd) in which a directory looks different; the
// session sees the directory as its caller does.
func TestDaemonSessionUsesCallersView(t *testing.T) {
	view := filepath.Join(t.TempDir(), "view")
	if err := os.MkdirAll(view, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(filepath.Dir(view), 0o755)
	if err := os.WriteFile(filepath.Join(view, "marker"), []byte("caller-view\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	setup := fmt.Sprintf("mount -t tmpfs -o mode=0755 sluice-daemon-view %[1]s && echo daemon-view > %[1]s/marker", view)
	f := newFixtureMount(t, nil, setup, "203.0.113.10")
	out, _, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "cat", filepath.Join(view, "marker"))
	if code != 0 || strings.TrimSpace(out) != "caller-view" {
		t.Fatalf("the session saw %q (exit %d), want the caller's view %q", out, code, "caller-view")
	}
	// The twin: the daemon really sees something else.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root%s/marker", f.daemon.Process.Pid, view))
	if err != nil || strings.TrimSpace(string(b)) != "daemon-view" {
		t.Fatalf("the daemon's own view is %q (%v), so the test proves nothing", b, err)
	}
}

// TestDaemonSessionIsolatesProcesses: pidfd_getfd on an outside process's
// socket, from a session the daemon started, is refused and nothing reaches
// the world; with share_processes it works (the twin); ps shows only the
// session; a confined caller cannot ask for share_processes.
func TestDaemonSessionIsolatesProcesses(t *testing.T) {
	world.EnableKernelAudit(t)
	f := newFixture(t, "203.0.113.10")
	udp := f.w.ListenUDP(t, world.DeniedV4)
	for _, share := range []bool{true, false} {
		t.Run(fmt.Sprintf("share=%v", share), func(t *testing.T) {
			pid, fd := startHolder(t, f)
			var flags []string
			if share {
				flags = []string{"--share-processes"}
			}
			start := time.Now()
			r, stderr := f.probeStderr(t, flags, "getfd", fmt.Sprint(pid), fd, "udp", world.DeniedV4.String(), fmt.Sprint(udp))
			if share {
				if !r.OK {
					t.Fatalf("with share_processes the attack failed, so the test proves nothing: %s", r)
				}
				if !f.w.WaitArrival(world.All(world.Since(start), world.ToPort(world.DeniedV4, udp)), 2*time.Second) {
					t.Fatalf("the stolen socket's datagram did not arrive: %v", f.w.Arrivals(nil))
				}
				return
			}
			if r.OK || r.Stage != "pidfd_getfd" || r.Errno != "EPERM" {
				t.Errorf("pidfd_getfd from a daemon session: %s, want EPERM", r)
			}
			f.w.AssertNothingArrived(t, world.All(world.Since(start), world.To(world.DeniedV4)), 300*time.Millisecond)
			f.wantSandboxDenial(t, stderr, "pidfd_getfd", pid)
		})
	}
	out, _, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "ps", "-e", "-o", "comm=")
	if code != 0 || strings.Fields(out)[0] != "ps" || len(strings.Fields(out)) != 1 {
		t.Errorf("ps in a daemon session lists %q (exit %d), want only itself", out, code)
	}
	// Job control, kill and strace work among the session's own
	// processes, and the exit status passes through.
	out, _, code = f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c",
		`sleep 30 & p=$!; kill $p; wait $p; echo "bg=$?"; if command -v strace >/dev/null; then strace -f -e trace=execve -o /dev/null true && echo traced; else echo traced; fi; exit 9`)
	if code != 9 || !strings.Contains(out, "bg=143") || !strings.Contains(out, "traced") {
		t.Errorf("job control, kill, strace or the exit status in a daemon session: exit %d: %s", code, out)
	}
	script := fmt.Sprintf(`%s --socket %s run --share-processes -- true 2>&1; echo "code=$?"`, sluiceBin, f.sock)
	out, _, _ = f.sluice(t, 65534, 65534, "run", "--", "sh", "-c", script)
	if !strings.Contains(out, "code=125") || !strings.Contains(out, "may not turn process isolation off") {
		t.Errorf("a confined caller asked for share_processes: %s", out)
	}
}

// startHolder starts `probe hold` unconfined as uid 65534 in the client
// namespace and returns its pid and UDP descriptor.
func startHolder(t *testing.T, f *fixture) (int, string) {
	t.Helper()
	out := filepath.Join(f.dir, fmt.Sprintf("hold-%d", time.Now().UnixNano()))
	cmd := exec.Command(world.BuildProbe(t), "-timeout", "60s", "hold", out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := f.w.StartInClient(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	fields := strings.Fields(string(waitFile(t, out)))
	if len(fields) != 3 {
		t.Fatalf("hold wrote %q", fields)
	}
	var pid int
	fmt.Sscan(fields[0], &pid)
	return pid, fields[1]
}

// TestDaemonSessionHidesCallersCredentials: the caller runs in a mount
// namespace whose /etc/passwd gives uid 65534 a home with credentials; the
// daemon (which sees the real /etc/passwd) hides them, because it builds
// the session from the caller's view; --show-path exempts one.
func TestDaemonSessionHidesCallersCredentials(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	home := filepath.Join(f.dir, "home")
	for _, rel := range []string{".aws/credentials", ".netrc", ".ssh/id_ed25519", ".config/gh/hosts.yml"} {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(secretMarker+rel+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_ = filepath.Walk(home, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	passwd := filepath.Join(f.dir, "passwd")
	if err := os.WriteFile(passwd, fmt.Appendf(nil, "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:%s:/bin/sh\n", home), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`cat %[1]s/.aws/credentials %[1]s/.netrc %[1]s/.ssh/id_ed25519 %[1]s/.config/gh/hosts.yml 2>&1; true`, home)
	var lastStderr string
	run := func(flags ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		args := append([]string{"--socket", f.sock, "run", "--user", "65534:65534"}, flags...)
		args = append(args, "--", "sh", "-c", script)
		c := f.w.ClientCmd(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
			`mount --bind "$0" /etc/passwd && exec "$@"`, passwd, sluiceBin}, args...)...)
		c.Dir = "/"
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		if err := c.Run(); err != nil {
			t.Fatalf("sluice %v: %v\n%s", args, err, errb.String())
		}
		t.Logf("sluice %v\nstdout: %s\nstderr: %s", args, out.String(), errb.String())
		lastStderr = errb.String()
		return out.String()
	}
	if out := run(); strings.Contains(out, secretMarker) {
		t.Errorf("a daemon session read the caller's credentials: %s", out)
	}
	if !strings.Contains(lastStderr, "sluice: sandbox: hidden") || !strings.Contains(lastStderr, filepath.Join(home, ".aws/credentials")) {
		t.Errorf("the client did not name what the daemon's session hid: %s", lastStderr)
	}
	// The audit log keeps it too (waitAudit fails the test otherwise).
	f.waitAudit(t, "session_started", func(e map[string]any) bool {
		m, _ := e["message"].(string)
		return strings.Contains(m, "sandbox hid") && strings.Contains(m, filepath.Join(home, ".aws/credentials"))
	})
	out := run("--show-path", "~/.netrc")
	if !strings.Contains(out, secretMarker+".netrc") || strings.Contains(out, secretMarker+".aws") {
		t.Errorf("--show-path ~/.netrc through the daemon: %s", out)
	}
	// The twin: the files are readable to uid 65534 without sluice.
	twin := exec.Command("sh", "-c", script)
	twin.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if b, _ := twin.CombinedOutput(); strings.Count(string(b), secretMarker) != 4 {
		t.Fatalf("without sluice the secrets are not all readable, so the test proves nothing: %s", b)
	}
}

// TestDaemonRefusesCallersOwnMountNamespace: a caller in a mount namespace
// of its own user namespace (unshare -cm: it can mount anything there,
// over the sluice binary the shim runs from, or over /etc/nsswitch.conf)
// does not get a session built from it; the same caller from the host's
// mount namespace does (the twin).
func TestDaemonRefusesCallersOwnMountNamespace(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		needs.Skip(t, "unshare(1) not installed: apt-get install util-linux")
	}
	try := exec.Command(unshare, "--map-current-user", "-m", "true")
	try.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := try.CombinedOutput(); err != nil {
		needs.Absent(t, "unprivileged user namespaces are unavailable here: %v: %s", err, out)
	}
	if _, _, code := f.sluice(t, 65534, 65534, "run", "--", "/bin/true"); code != 0 {
		t.Fatalf("the twin, from the host's mount namespace, failed: exit %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, unshare, "--map-current-user", "-m", sluiceBin, "--socket", f.sock, "run", "--", "/bin/true")
	c.Dir = "/"
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err = f.w.StartInClient(c)
	if err == nil {
		err = c.Wait()
	}
	t.Logf("unshare -cm sluice run: %v\n%s", err, out.String())
	if err == nil || !strings.Contains(out.String(), "another user namespace") {
		t.Fatalf("a session was built from the caller's own mount namespace: %v\n%s", err, out.String())
	}
}

// TestDaemonSessionCannotTouchOutsideProcesses: ptrace injection,
// process_vm_writev, /proc/PID/mem and signals from a daemon session into a
// sleeping same-uid process outside it are refused, and nothing reaches the
// world; with share_processes the same probes work (the twins).
func TestDaemonSessionCannotTouchOutsideProcesses(t *testing.T) {
	world.EnableKernelAudit(t)
	f := newFixture(t, "203.0.113.10")
	udp := f.w.ListenUDP(t, world.DeniedV4)
	for _, share := range []bool{true, false} {
		var flags []string
		if share {
			flags = []string{"--share-processes"}
		}
		for _, op := range []string{"ptrace-inject", "vm-write", "mem-write", "signal"} {
			t.Run(fmt.Sprintf("%s/share=%v", op, share), func(t *testing.T) {
				pid := startSleeper(t, f)
				var args []string
				switch op {
				case "ptrace-inject":
					args = []string{op, fmt.Sprint(pid), world.DeniedV4.String(), fmt.Sprint(udp)}
				case "signal":
					args = []string{op, fmt.Sprint(pid)}
				default:
					args = []string{op, fmt.Sprint(pid), stackAddr(t, pid)}
				}
				start := time.Now()
				r, stderr := f.probeStderr(t, flags, args...)
				if strings.Contains(r.Error, "only on amd64") {
					needs.Absent(t, "ptrace-inject is written for amd64 only")
				}
				if share != r.OK {
					t.Fatalf("%s with share_processes=%v: %s", op, share, r)
				}
				arrived := world.All(world.Since(start), world.ToPort(world.DeniedV4, udp))
				if share && op == "ptrace-inject" && !f.w.WaitArrival(arrived, 2*time.Second) {
					t.Fatalf("the injected datagram did not arrive: %v", f.w.Arrivals(nil))
				}
				if !share {
					f.w.AssertNothingArrived(t, arrived, 300*time.Millisecond)
					// The probe reads before it writes: the read is
					// what process_vm_* is refused.
					access := map[string]string{"ptrace-inject": "ptrace", "vm-write": "process_vm_readv", "mem-write": "/proc files", "signal": "signal"}[op]
					f.wantSandboxDenial(t, stderr, access, pid)
				}
			})
		}
	}
}

// startSleeper starts `sleep 60` unconfined as uid 65534 in the client
// namespace and waits until it sleeps.
func startSleeper(t *testing.T, f *fixture) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := f.w.StartInClient(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)); err == nil && strings.Contains(string(b), "(sleep) S") {
			return cmd.Process.Pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("sleep %d did not start sleeping", cmd.Process.Pid)
	return 0
}

// stackAddr is the start of pid's [stack] mapping, in hex.
func stackAddr(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.HasSuffix(l, "[stack]") {
			start, _, _ := strings.Cut(l, "-")
			return start
		}
	}
	t.Fatalf("no [stack] in /proc/%d/maps", pid)
	return ""
}
