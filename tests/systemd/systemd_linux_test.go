// SPDX-License-Identifier: Apache-2.0

//go:build linux

package systemd

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/tests/needs"
)

// bootTimeout bounds the whole container run: boot, inside.sh (whose own
// waits are bounded) and poweroff.
const bootTimeout = 150 * time.Second

// skipOrFail skips, or fails where the kernel suites are required (CI).
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if needs.Required() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSessionsAreScopesAndSurviveRestart boots systemd, installs sluice's
// unit and runs inside.sh, which checks a daemonless session, two daemon
// sessions across a restart of the unit, and where their cgroups are.
func TestSessionsAreScopesAndSurviveRestart(t *testing.T) {
	bootAndRun(t, "inside.sh", nil, nil)
}

// bootAndRun boots Debian's systemd in a systemd-nspawn container with
// sluice's packaged unit and a sluice binary built from this tree, runs the
// script (a file of this directory) as the one job of the boot target, and
// fails unless its log ends in "EXIT 0". setup may add to the root file
// system before the boot; extra are more systemd-nspawn arguments.
func bootAndRun(t *testing.T, scriptName string, setup func(root string), extra []string) {
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root (systemd-nspawn, bpffs)")
	}
	for _, tool := range []string{"systemd-nspawn", "debootstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, "needs %s (apt-get install systemd-container debootstrap)", tool)
		}
	}
	repo := repoRoot(t)
	base := filepath.Join(os.TempDir(), "sluice-systemd-test")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(base, "boot-")
	if err != nil {
		t.Fatal(err)
	}
	root, bpffs := filepath.Join(dir, "root"), filepath.Join(dir, "bpf")
	t.Cleanup(func() {
		// The container is gone once systemd-nspawn has returned; its
		// private bpffs goes with the unmount, its files with the rest.
		_ = unix.Unmount(bpffs, unix.MNT_DETACH)
		unmountUnder(root)
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// The root file system (cached after the first run) and the binary.
	tarball := run("tests/systemd/rootfs.sh")
	if i := strings.LastIndexByte(tarball, '\n'); i >= 0 {
		tarball = tarball[i+1:]
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	run("tar", "-C", root, "-xf", tarball)
	// Tarballs made by mktemp'd directories record a 0700 root, which
	// would keep every user but root out of everything.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	run("go", "build", "-o", filepath.Join(root, "usr/local/bin/sluice"), "./cmd/sluice")

	// The packaged unit as it is, pointed at the binary; the test script
	// as the one job of a target the container boots into.
	unit, err := os.ReadFile(filepath.Join(repo, "packaging/sluice.service"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(repo, "tests/systemd", scriptName))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"etc/systemd/system/sluice.service":      string(unit),
		"etc/systemd/system/sluice-test.service": "[Unit]\nDescription=sluice systemd test\n[Service]\nType=oneshot\nExecStart=/sluice-test.sh\nTimeoutStopSec=5\n",
		"etc/systemd/system/sluice-test.target": "[Unit]\nDescription=sluice systemd test\nRequires=basic.target\nAfter=basic.target\n" +
			"Wants=sluice-test.service\nAllowIsolate=yes\n",
		"sluice-test.sh": string(script),
		"etc/hostname":   "sluice-systemd-test\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/sluice daemon") {
		t.Fatal("packaging/sluice.service no longer runs /usr/local/bin/sluice daemon: adapt this test")
	}
	if setup != nil {
		setup(root)
	}

	// A bpffs of the container's own, so that its pins are never the
	// host's.
	if err := os.Mkdir(bpffs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("bpf", bpffs, "bpf", 0, "mode=700"); err != nil {
		t.Fatalf("mount a private bpffs: %v", err)
	}

	bootCtx, bootCancel := context.WithTimeout(ctx, bootTimeout)
	defer bootCancel()
	machine := "sluice-" + filepath.Base(dir)
	args := []string{"--quiet", "--boot",
		"--directory", root, "--machine", strings.ToLower(strings.ReplaceAll(machine, "_", "-")),
		// No machined on a host without systemd: do not register, and
		// stay in this process's cgroup.
		"--register=no", "--keep-unit",
		// Loopback only.
		"--private-network",
		// The daemon's privileges, and the system calls nspawn's own
		// filter leaves out.
		"--capability=CAP_BPF,CAP_PERFMON,CAP_NET_ADMIN",
		"--system-call-filter=bpf perf_event_open landlock_create_ruleset landlock_add_rule landlock_restrict_self",
		"--bind=" + bpffs + ":/sys/fs/bpf",
		// When the deadline sends nspawn SIGTERM, it kills the container
		// at once instead of asking it to power off, which could hang.
		"--kill-signal=SIGKILL"}
	args = append(append(args, extra...), "systemd.unit=sluice-test.target")
	boot := exec.CommandContext(bootCtx, "systemd-nspawn", args...)
	// A pure cgroup v2 tree inside, whatever the host's layout.
	boot.Env = append(os.Environ(), "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1")
	// SIGTERM makes nspawn kill the container (--kill-signal) and exit;
	// SIGKILL for nspawn itself only if that hangs.
	boot.Cancel = func() error { return boot.Process.Signal(unix.SIGTERM) }
	boot.WaitDelay = 20 * time.Second
	start := time.Now()
	console, err := boot.CombinedOutput()
	elapsed := time.Since(start)
	log, lerr := os.ReadFile(filepath.Join(root, "sluice-test.log"))
	t.Logf("container ran %v; %s said:\n%s", elapsed.Round(time.Second), scriptName, log)
	if err != nil && !errors.Is(bootCtx.Err(), context.DeadlineExceeded) {
		t.Logf("systemd-nspawn: %v", err)
	}
	if lerr != nil || !strings.Contains(string(log), "\nEXIT 0\n") {
		tail := string(console)
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		t.Fatalf("%s did not pass (read log: %v; nspawn: %v, deadline hit: %v); console tail:\n%s", scriptName, lerr, err, bootCtx.Err() != nil, tail)
	}
}

// unmountUnder lazily unmounts every mount point below dir, deepest first
// (what an engine inside the container left, should it not have cleaned
// up).
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = unix.Unmount(points[i], unix.MNT_DETACH)
	}
}
