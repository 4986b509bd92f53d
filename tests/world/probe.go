// SPDX-License-Identifier: Apache-2.0

//go:build linux

package world

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// probePackage is the import path of the confined test program.
const probePackage = "github.com/sluice-dev/sluice/tests/probe"

// probeRunTimeout bounds a whole probe run; the probe bounds itself to
// -timeout plus a second, so this only fires if something is badly wrong.
const probeRunTimeout = 30 * time.Second

// probeBuild holds the one build per test binary.
var probeBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// BuildProbe builds tests/probe once per test binary and returns the path of
// the binary. Its directory is world-readable and searchable, so the probe
// can be run as another user (uid 65534). Call RemoveProbe from TestMain.
func BuildProbe(t testing.TB) string {
	t.Helper()
	probeBuild.once.Do(func() {
		probeBuild.dir, probeBuild.path, probeBuild.err = buildProbe()
	})
	if probeBuild.err != nil {
		t.Fatalf("world: %v", probeBuild.err)
	}
	return probeBuild.path
}

// RemoveProbe deletes the binary BuildProbe built, if any. Call it from
// TestMain after m.Run.
func RemoveProbe() {
	if probeBuild.dir != "" {
		os.RemoveAll(probeBuild.dir)
	}
}

func buildProbe() (dir, path string, err error) {
	dir, err = os.MkdirTemp(tempBase(), "sluice-probe-")
	if err != nil {
		return "", "", fmt.Errorf("building probe: %w", err)
	}
	// MkdirTemp makes 0700; others must be able to reach the binary.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("building probe: %w", err)
	}
	path = filepath.Join(dir, "probe")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, probePackage)
	// Static, so it runs wherever the test puts it.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("go build %s: %w\n%s", probePackage, err, out)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("building probe: %w", err)
	}
	return dir, path, nil
}

// tempBase is os.TempDir when every directory on its path lets others
// through (o+x), else /tmp: a TMPDIR under /root would hide the probe from
// uid 65534.
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

// ProbeResult is the JSON line the probe prints (see tests/probe), plus how
// the process ended.
type ProbeResult struct {
	Op          string `json:"op"`
	OK          bool   `json:"ok"`
	Errno       string `json:"errno"`
	Error       string `json:"error"`
	Stage       string `json:"stage"`
	Timeout     bool   `json:"timeout"`
	Unsupported bool   `json:"unsupported"`
	Reply       string `json:"reply"`
	Sent        int    `json:"sent"`
	PID         int    `json:"pid"`
	// Escapes, CgroupFrom and CgroupTo come from escape-cgroup, whose
	// wrapped action's result is Action.
	Escapes    []CgroupMove `json:"escapes"`
	CgroupFrom string       `json:"cgroup_from"`
	CgroupTo   string       `json:"cgroup_to"`
	Action     *ProbeResult `json:"action"`

	// Rcode, Answers and From come from the DNS actions (dns, resolve,
	// resolve-tcp): the reply's rcode, its addresses, and where the reply
	// seemed to come from.
	Rcode   string   `json:"rcode"`
	Answers []string `json:"answers"`
	From    string   `json:"from"`
	// Note is what an action observed beside its outcome (tls-attack:
	// "syn-data" when the server acknowledged data in the SYN).
	Note string `json:"note"`

	// ExitCode is the probe's exit status (0 ok, 1 failed, 2 usage), when
	// known; Stderr is what it wrote there; Line is the raw JSON line.
	ExitCode int    `json:"-"`
	Stderr   string `json:"-"`
	Line     string `json:"-"`
}

// CgroupMove is one escape-cgroup attempt: writing the probe's pid to Path.
type CgroupMove struct {
	Path  string `json:"path"`
	OK    bool   `json:"ok"`
	Errno string `json:"errno"`
	Error string `json:"error"`
}

// String is the raw line, or a summary when there was none.
func (r ProbeResult) String() string {
	if r.Line != "" {
		return r.Line
	}
	return fmt.Sprintf("no result (exit %d, stderr %q)", r.ExitCode, r.Stderr)
}

// ParseProbeResult decodes the last non-empty line of a probe's output.
func ParseProbeResult(out []byte) (ProbeResult, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	line := strings.TrimSpace(lines[len(lines)-1])
	if line == "" {
		return ProbeResult{}, errors.New("probe printed nothing")
	}
	var r ProbeResult
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return ProbeResult{}, fmt.Errorf("probe printed %q: %w", line, err)
	}
	r.Line = line
	return r, nil
}

// RunProbe runs the probe with args in the client namespace, started from
// inside it so that attr (nil, or e.g. a Credential for uid 65534, a cgroup
// fd) applies to the probe itself, and returns its result. It fails the test
// if args contain an address that is not Safe, or if the probe produced no
// result; a failed action is a result, not a test failure.
func (w *World) RunProbe(t testing.TB, attr *syscall.SysProcAttr, args ...string) ProbeResult {
	t.Helper()
	for _, a := range args {
		if ip, err := netip.ParseAddr(a); err == nil && !Safe(ip) {
			t.Fatalf("world: refusing to run a probe towards %v: only loopback and the test ranges are allowed", ip)
		}
	}
	path := BuildProbe(t)
	ctx, cancel := context.WithTimeout(context.Background(), probeRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = attr
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := w.StartInClient(cmd); err != nil {
		t.Fatalf("world: starting probe %v: %v", args, err)
	}
	waitErr := cmd.Wait()
	r, err := ParseProbeResult(stdout.Bytes())
	r.ExitCode, r.Stderr = cmd.ProcessState.ExitCode(), stderr.String()
	if err != nil {
		t.Fatalf("world: probe %v: %v (wait: %v, stderr: %q)", args, err, waitErr, stderr.String())
	}
	t.Logf("probe %s -> %s", strings.Join(args, " "), r.Line)
	return r
}
