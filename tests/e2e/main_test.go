// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Package e2e drives the sluice binary against the real kernel: every
// containment case runs `sluice run` inside the client namespace of a test
// world (tests/world), lets a confined probe (tests/probe) try to reach a
// denied host, and passes only when the world's sniffer recorded nothing
// towards it; each has a positive twin showing the same path works when
// allowed (or unconfined), so no case can pass vacuously.
//
// Decisions:
//   - TestMain builds sluice once and picks a random instance name
//     (SLUICE_INSTANCE=sluice-e2e-XXXXXXXX) used by every invocation, so the
//     tests never touch a real installation. At the end it runs
//     `sluice cleanup` and checks that the instance's pins and cgroup root
//     are gone.
//   - Tests with sluice sessions never run in parallel: after each test the
//     instance must be quiescent (no session cgroup, no entry in the
//     per-session datapath maps), which newWorld's cleanup asserts.
//   - Each test builds its own world (a few milliseconds), so arrivals
//     never leak from one test into another; within a test, filters use
//     Since and kernel-chosen ports.
//   - Every wait is bounded, and every sluice run has a context deadline.
//   - The confined command always runs as uid/gid 65534.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

// Timing bounds.
const (
	runTimeout = 60 * time.Second       // one whole `sluice run`
	settle     = 300 * time.Millisecond // for packets in flight before asserting silence
	arrival    = 2 * time.Second        // for a packet the test expects
	waitBound  = 10 * time.Second       // for a file or a state the test waits for
)

// The confined command's user.
const nobodyUser = "65534:65534"

// Set by TestMain when running as root.
var (
	sluiceBin string // the sluice binary under test
	instance  string // SLUICE_INSTANCE of every invocation
	cgMount   string // the cgroup2 mount point
)

// The datapath maps that hold per-session state; all must be empty between
// runs.
var sessionMaps = []string{"sessions", "session_counters", "cidrs", "learned", "session_events", "unix_allowed", "unix_globs", "loopback_ports"}

// defaultPolicy is the allowlist of most containment cases: AllowedV4 and
// AllowedV6's /64, and nothing of DeniedV4/DeniedV6.
var defaultPolicy = []string{world.AllowedV4.String(), world.AllowedV6Prefix.String()}

// nobody runs an unconfined probe as the confined command's user.
var nobody = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if code, ready := needs.Main(m, "e2e", needs.Kernel...); !ready {
		return code // every test skips, or one failure under SLUICE_REQUIRE_KERNEL=1
	}
	dir, err := os.MkdirTemp(tempBase(), "sluice-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	defer world.RemoveProbe()
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if cgMount, err = cgroups.Mount(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: no cgroup2 mount:", err)
		return 1
	}
	sluiceBin = filepath.Join(dir, "sluice")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", sluiceBin, "github.com/sluice-dev/sluice/cmd/sluice")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building sluice: %v\n%s", err, out)
		return 1
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	instance = "sluice-e2e-" + hex.EncodeToString(rnd[:])

	code := m.Run()

	if err := finalCleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: final cleanup:", err)
		code = 1
	}
	return code
}

// finalCleanup runs `sluice cleanup` for the test instance and checks that
// it left neither pins nor a cgroup root.
func finalCleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sluiceBin, "cleanup")
	cmd.Env = sluiceEnv()
	out, err := cmd.CombinedOutput()
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("sluice cleanup: %v: %s", err, out))
	}
	for _, p := range []string{pinDir(), cgRoot(), "/run/" + instance} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s still exists after `sluice cleanup` (stat: %v)", p, err))
		}
	}
	return errors.Join(errs...)
}

// tempBase is os.TempDir when others can traverse every directory on its
// path, else /tmp: the confined command runs as uid 65534.
func tempBase() string {
	base := os.TempDir()
	for d := base; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return base
		}
	}
}

func pinDir() string { return "/sys/fs/bpf/" + instance }
func cgRoot() string { return filepath.Join(cgMount, instance) }

func sluiceEnv() []string { return append(os.Environ(), "SLUICE_INSTANCE="+instance) }

// requireRoot skips a test that needs root and the rest of the kernel
// suites' preconditions (a failure under SLUICE_REQUIRE_KERNEL=1).
func requireRoot(t *testing.T) {
	t.Helper()
	needs.Have(t, needs.Kernel...)
}

// newWorld requires root, builds a test world and, at the end of the test,
// asserts that the sluice instance is quiescent again.
func newWorld(t *testing.T) *world.World {
	t.Helper()
	requireRoot(t)
	t.Cleanup(func() { assertQuiescent(t) })
	return world.New(t)
}

// probeBin is the probe binary, built once per test binary.
func probeBin(t *testing.T) string {
	t.Helper()
	return world.BuildProbe(t)
}

// sharedDir is a temporary directory that the confined user (65534) can
// write to, removed at cleanup.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(tempBase(), "sluice-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runArgs builds the arguments of `sluice run` for the confined user.
func runArgs(allow []string, flags []string, command ...string) []string {
	args := []string{"run", "--user", nobodyUser}
	for _, a := range allow {
		args = append(args, "--allow", a)
	}
	args = append(args, flags...)
	return append(append(args, "--"), command...)
}

// sluiceCmd is `sluice ARGS...` for the test instance, started inside the
// client namespace of w (or here, without network, when w is nil). nsenter
// execs sluice without forking, so the command's process is sluice itself.
func sluiceCmd(ctx context.Context, w *world.World, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if w != nil {
		cmd = w.ClientCmd(ctx, sluiceBin, args...)
	} else {
		cmd = exec.CommandContext(ctx, sluiceBin, args...)
	}
	cmd.Env = sluiceEnv()
	// A leftover holding the output pipes must not hang the test.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runResult is how one sluice invocation ended.
type runResult struct {
	Code           int
	Stdout, Stderr string
	Elapsed        time.Duration
}

func (r runResult) String() string {
	return fmt.Sprintf("exit %d after %v\nstdout:\n%s\nstderr:\n%s", r.Code, r.Elapsed.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// runSluice runs sluice with args (in w's client namespace unless w is
// nil) and returns its exit status and output; a run that cannot start or
// exceeds runTimeout fails the test.
func runSluice(t *testing.T, w *world.World, args ...string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := sluiceCmd(ctx, w, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := runResult{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("sluice %s: no exit within %v\n%v", strings.Join(args, " "), runTimeout, r)
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		t.Fatalf("sluice %s: %v\n%v", strings.Join(args, " "), err, r)
	}
	t.Logf("sluice %s\n%v", strings.Join(args, " "), r)
	return r
}

// startSluice starts sluice with args in w's client namespace (here when w
// is nil) with its output going to files, so that neither a SIGKILL nor a
// leftover process holding the output can hang a Wait. The returned wait
// function reaps it and returns its exit status and output; sluice is
// killed, and the test fails, if it has not exited within timeout of its
// start.
func startSluice(t *testing.T, w *world.World, timeout time.Duration, args ...string) (proc *os.Process, wait func() runResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	c := sluiceCmd(ctx, w, args...)
	dir := t.TempDir()
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c.Stdout, c.Stderr = stdout, stderr
	start := time.Now()
	if err := c.Start(); err != nil {
		cancel()
		t.Fatalf("starting sluice %s: %v", strings.Join(args, " "), err)
	}
	stdout.Close()
	stderr.Close()
	var res *runResult
	wait = func() runResult {
		t.Helper()
		if res != nil {
			return *res
		}
		_ = c.Wait() // the status is in ProcessState
		if ctx.Err() != nil {
			t.Errorf("sluice %s: no exit within %v (killed)", strings.Join(args, " "), timeout)
		}
		cancel()
		r := runResult{Elapsed: time.Since(start), Code: c.ProcessState.ExitCode()}
		if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Code = 128 + int(ws.Signal())
		}
		b, _ := os.ReadFile(filepath.Join(dir, "stdout"))
		r.Stdout = string(b)
		b, _ = os.ReadFile(filepath.Join(dir, "stderr"))
		r.Stderr = string(b)
		t.Logf("sluice %s\n%v", strings.Join(args, " "), r)
		res = &r
		return r
	}
	t.Cleanup(func() {
		if res == nil {
			_ = c.Process.Kill()
			wait()
		}
	})
	return c.Process, wait
}

// waitFile waits for path to exist, failing the test after waitBound.
func waitFile(t *testing.T, path string) {
	t.Helper()
	if !waitFor(func() bool { return exists(path) }) {
		t.Fatalf("%s did not appear within %v", path, waitBound)
	}
}

// checkSafe fails the test if args name an address outside loopback and
// the test ranges.
func checkSafe(t *testing.T, args []string) {
	t.Helper()
	for _, a := range args {
		if ip, err := netip.ParseAddr(a); err == nil && !world.Safe(ip) {
			t.Fatalf("e2e: refusing to send traffic to %v: only loopback and the test ranges are allowed", ip)
		}
	}
}

// confinedProbe runs the probe with probeArgs under `sluice run` with the
// allow entries and extra flags, in the client namespace, and returns the
// probe's result and sluice's output.
func confinedProbe(t *testing.T, w *world.World, allow, flags []string, probeArgs ...string) (world.ProbeResult, runResult) {
	t.Helper()
	checkSafe(t, probeArgs)
	run := runSluice(t, w, runArgs(allow, flags, append([]string{probeBin(t)}, probeArgs...)...)...)
	r, err := world.ParseProbeResult([]byte(run.Stdout))
	if err != nil {
		t.Fatalf("confined probe %v: %v\n%v", probeArgs, err, run)
	}
	r.ExitCode = run.Code
	return r, run
}

// shellCommand runs script under `sluice run` in the client namespace.
func shellCommand(t *testing.T, w *world.World, allow, flags []string, script string) runResult {
	t.Helper()
	return runSluice(t, w, runArgs(allow, flags, "sh", "-c", script)...)
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// probeLine is a shell command line that runs the probe.
func probeLine(t *testing.T, args ...string) string {
	t.Helper()
	checkSafe(t, args)
	q := []string{shq(probeBin(t))}
	for _, a := range args {
		q = append(q, shq(a))
	}
	return strings.Join(q, " ")
}

func port(p uint16) string { return strconv.Itoa(int(p)) }

// mapped is a's IPv4-mapped IPv6 form.
func mapped(a netip.Addr) netip.Addr { return netip.AddrFrom16(a.As16()) }

// dest is how sluice names a destination: "203.0.113.20:443/tcp".
func dest(a netip.Addr, p uint16, proto string) string {
	return netip.AddrPortFrom(a, p).String() + "/" + proto
}

// wantDenied fails unless r is an EPERM failure (at stage, if given).
func wantDenied(t *testing.T, r world.ProbeResult, stage string) {
	t.Helper()
	if r.OK || r.Errno != "EPERM" || (stage != "" && r.Stage != stage) {
		want := "EPERM"
		if stage != "" {
			want += " at " + stage
		}
		t.Errorf("probe %s: got %v, want %s", r.Op, r, want)
	}
}

// wantOK fails unless r succeeded.
func wantOK(t *testing.T, r world.ProbeResult) {
	t.Helper()
	if !r.OK {
		t.Errorf("probe %s failed: %v", r.Op, r)
	}
}

// denialLines are sluice's per-denial lines in stderr (not the summary).
func denialLines(stderr string) []string {
	var out []string
	for l := range strings.SplitSeq(stderr, "\n") {
		if strings.HasPrefix(l, "sluice: denied ") && strings.Contains(l, " -> ") {
			out = append(out, l)
		}
	}
	return out
}

// wantDenialLine fails unless stderr holds the line sluice prints when the
// probe was refused reaching destination for reason, and returns the pid
// that line names. verb is "denied" or "audit: would deny".
func wantDenialLine(t *testing.T, stderr, verb, destination, reason string) int {
	t.Helper()
	return wantDenialLineOf(t, stderr, verb, "probe", destination, reason)
}

// wantDenialLineOf is wantDenialLine for a process named comm (any name
// when comm is "").
func wantDenialLineOf(t *testing.T, stderr, verb, comm, destination, reason string) int {
	t.Helper()
	name := `[^\[\]]+`
	if comm != "" {
		name = regexp.QuoteMeta(comm)
	}
	re := regexp.MustCompile(`(?m)^sluice: ` + regexp.QuoteMeta(verb) + ` ` + name + `\[(\d+)\] -> ` +
		regexp.QuoteMeta(destination) + `: ` + regexp.QuoteMeta(reason) + `$`)
	m := re.FindStringSubmatch(stderr)
	if m == nil {
		t.Errorf("stderr has no line matching %s\nstderr:\n%s", re, stderr)
		return 0
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// wantSummary fails unless stderr ends with sluice's denial summary.
func wantSummary(t *testing.T, stderr string, attempts, dests int) {
	t.Helper()
	want := fmt.Sprintf("sluice: denied %d attempt%s to reach %d destination%s", attempts, plural(attempts), dests, plural(dests))
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks the summary %q\nstderr:\n%s", want, stderr)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// arrived selects packets to addr:port (any port when p is 0) since start.
func arrived(start time.Time, addr netip.Addr, p uint16) world.Filter {
	if p == 0 {
		return world.All(world.Since(start), world.To(addr))
	}
	return world.All(world.Since(start), world.ToPort(addr, p))
}

// wantArrival fails unless a packet f selects arrives in time.
func wantArrival(t *testing.T, w *world.World, f world.Filter, what string) {
	t.Helper()
	if !w.WaitArrival(f, arrival) {
		t.Errorf("the world recorded no packet of %s; it saw %v", what, w.Arrivals(nil))
	}
}

// sessionDirs lists the session cgroups under the instance's root.
func sessionDirs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(cgRoot())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatalf("listing %s: %v", cgRoot(), err)
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(cgRoot(), e.Name()))
		}
	}
	return dirs
}

// mapEntries counts the keys of each per-session datapath map; a map that
// is not pinned counts as empty.
func mapEntries(t *testing.T) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, name := range sessionMaps {
		m, err := ebpf.LoadPinnedMap(filepath.Join(pinDir(), name), &ebpf.LoadPinOptions{ReadOnly: true})
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Errorf("opening pinned map %s: %v", name, err)
			continue
		}
		var key any
		for n := 0; ; n++ {
			next, err := m.NextKeyBytes(key)
			if err != nil {
				t.Errorf("iterating pinned map %s: %v", name, err)
				break
			}
			if next == nil {
				break
			}
			counts[name]++
			key = next
			if n > 1<<20 {
				t.Errorf("pinned map %s: iteration does not end", name)
				break
			}
		}
		m.Close()
	}
	return counts
}

// assertQuiescent fails if any session cgroup or per-session map entry of
// the instance is left.
func assertQuiescent(t *testing.T) {
	t.Helper()
	if dirs := sessionDirs(t); len(dirs) > 0 {
		t.Errorf("session cgroups left under %s: %v", cgRoot(), dirs)
	}
	for name, n := range mapEntries(t) {
		if n > 0 {
			t.Errorf("pinned map %s still holds %d entr%s", name, n, map[bool]string{true: "y", false: "ies"}[n == 1])
		}
	}
}

// waitFor polls cond every 20ms until it holds or waitBound passes, and
// reports whether it held.
func waitFor(cond func() bool) bool {
	end := time.Now().Add(waitBound)
	for {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// touch creates an empty file.
func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o666); err != nil {
		t.Fatal(err)
	}
}

// readProbeFile waits for path to hold a probe's JSON line and parses it.
func readProbeFile(t *testing.T, path string) world.ProbeResult {
	t.Helper()
	var r world.ProbeResult
	var perr error
	ok := waitFor(func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		r, perr = world.ParseProbeResult(b)
		return true
	})
	if !ok {
		t.Fatalf("%s: no probe result within %v", path, waitBound)
	}
	if perr != nil {
		t.Fatalf("%s: %v", path, perr)
	}
	return r
}

// probeLines parses every JSON line a shell command printed, in order.
func probeLines(t *testing.T, stdout string) []world.ProbeResult {
	t.Helper()
	var rs []world.ProbeResult
	for l := range strings.SplitSeq(strings.TrimSpace(stdout), "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		r, err := world.ParseProbeResult([]byte(l))
		if err != nil {
			t.Fatalf("probe line %q: %v", l, err)
		}
		rs = append(rs, r)
	}
	return rs
}
