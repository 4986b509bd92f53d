// SPDX-License-Identifier: Apache-2.0

//go:build linux

package ci_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

var (
	sluiceBin string
	instance  string
)

func TestMain(m *testing.M) {
	code := func() int {
		if code, ready := needs.Main(m, "ci", needs.Kernel...); !ready {
			return code
		}
		bin, inst, cleanup, err := world.SluiceForTests("sluice-ci")
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			return 1
		}
		defer cleanup()
		sluiceBin, instance = bin, inst
		return m.Run()
	}()
	os.Exit(code)
}

// The world's DNS server, the upstream of the jobs' daemons.
const dnsAddr = "203.0.113.53"

// job is a CI job on a runner in the world's client namespace: a runner
// temp directory, the job's environment, steps run as uid 65534.
type job struct {
	t      *testing.T
	w      *world.World
	prefix string // where install.sh put sluice, sluice-ci, sluice-shell
	dir    string // RUNNER_TEMP
	env    []string
	steps  int
}

// runner is an installed action: install.sh run once, like the action's
// first step.
type runner struct {
	w      *world.World
	prefix string
	base   string
}

func newRunner(t *testing.T) *runner {
	w := world.New(t)
	needs.Have(t, needs.Kernel...)
	w.ServeDNS(t, mustAddr(dnsAddr), world.Zone(map[string][]string{
		"allowed.test.": {"A 203.0.113.10"},
		"denied.test.":  {"A 203.0.113.20"},
		"new.test.":     {"A 203.0.113.20"},
	}))
	base, err := os.MkdirTemp("/tmp", "sluice-ci-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &runner{w: w, prefix: filepath.Join(base, "prefix"), base: base}
	out, code := r.root(t, nil, "bash", "github/install.sh")
	if code != 0 {
		t.Fatalf("install.sh: exit %d\n%s", code, out)
	}
	return r
}

// root runs a command as root in the client namespace, from ci/.
func (r *runner) root(t *testing.T, env []string, name string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := r.w.ClientCmd(ctx, name, args...)
	c.Env = append(append(os.Environ(), "SLUICE_INSTANCE="+instance, "SLUICE_BIN="+sluiceBin, "SLUICE_CI_PREFIX="+r.prefix), env...)
	c.WaitDelay = 5 * time.Second
	var b bytes.Buffer
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v: no exit within 90 s\n%s", name, args, b.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return b.String(), code
}

// startJob runs the action's setup step (ci/github/setup.sh) with inputs.
func (r *runner) startJob(t *testing.T, name string, inputs ...string) *job {
	t.Helper()
	dir := filepath.Join(r.base, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(dir, "github_env")
	env := append([]string{"RUNNER_TEMP=" + dir, "GITHUB_ENV=" + envFile, "SLUICE_CI_GROUP=65534",
		"SLUICE_CI_DAEMON_FLAGS=--dns-upstream " + dnsAddr, "SLUICE_CI_STATE_DIR=/run/" + instance + "-" + name}, inputs...)
	j := &job{t: t, w: r.w, prefix: r.prefix, dir: dir}
	t.Cleanup(func() {
		// finish stops the daemon; a failed test may not have got there.
		if b, err := os.ReadFile(filepath.Join(dir, "sluice", "daemon.pid")); err == nil {
			if p, err := os.FindProcess(atoi(string(b))); err == nil {
				_ = p.Kill()
			}
			time.Sleep(100 * time.Millisecond)
		}
		c := exec.Command(sluiceBin, "cleanup", "--state-dir", "/run/"+instance+"-"+name)
		c.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance)
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("sluice cleanup: %v: %s", err, out)
		}
	})
	out, code := r.root(t, env, "bash", "github/setup.sh")
	if code != 0 {
		t.Fatalf("setup.sh: exit %d\n%s", code, out)
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatalf("setup.sh wrote no GITHUB_ENV: %v\n%s", err, out)
	}
	j.env = append(env, strings.Split(strings.TrimSpace(string(b)), "\n")...)
	return j
}

// step runs a `run:` step's script the way the runner does with
// `shell: sluice-shell {0}`, as the job's user (65534); it returns the
// output, the exit status and the step's summary file.
func (j *job) step(script string, env ...string) (string, int, string) {
	t := j.t
	t.Helper()
	j.steps++
	id := "__run"
	if j.steps > 1 {
		id += "_" + atoiString(j.steps)
	}
	path := filepath.Join(j.dir, id+".sh")
	summary := filepath.Join(j.dir, id+".summary.md")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(summary, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(summary, 0o666)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := j.w.ClientCmd(ctx, "setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--",
		filepath.Join(j.prefix, "bin", "sluice-shell"), path)
	c.Env = append([]string{"PATH=" + os.Getenv("PATH"), "SLUICE_INSTANCE=" + instance,
		"GITHUB_ACTION=" + id, "GITHUB_STEP_SUMMARY=" + summary}, append(j.env, env...)...)
	c.Dir = j.dir
	c.WaitDelay = 5 * time.Second
	var b bytes.Buffer
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("step %s: %v", id, err)
	}
	s, _ := os.ReadFile(summary)
	t.Logf("step %s: exit %d\n%s\nsummary:\n%s", id, code, b.String(), s)
	if code == 125 {
		log, _ := os.ReadFile(filepath.Join(j.dir, "sluice", "daemon.log"))
		t.Logf("daemon.log:\n%s", log)
	}
	return b.String(), code, string(s)
}

// finish runs the finish step (ci/github/finish.sh) and returns the job
// summary it wrote.
func (j *job) finish(r *runner) string {
	t := j.t
	t.Helper()
	summary := filepath.Join(j.dir, "finish.summary.md")
	out, code := r.root(t, append(j.env, "GITHUB_STEP_SUMMARY="+summary), "bash", "github/finish.sh")
	if code != 0 {
		t.Fatalf("finish.sh: exit %d\n%s", code, out)
	}
	s, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("job summary:\n%s", s)
	return string(s)
}

func tcpTo(host string, port uint16) string {
	return "exec 3<>/dev/tcp/" + host + "/" + atoiString(int(port)) + " || exit 7\necho reached " + host + "\n"
}

// TestGitHubJourney is the audit → block journey of README through the
// action's scripts: an audit job reaches an allowed and a not-yet-allowed
// host, its summary names the second and the learned allowlist holds
// both; a block job with that allowlist passes; a later block job whose
// step needs a new host fails, with the explanation and the suggested
// entry, and its summary names it; the world saw nothing of that step.
func TestGitHubJourney(t *testing.T) {
	r := newRunner(t)
	allowedPort := r.w.ListenTCP(t, world.AllowedV4)
	deniedPort := r.w.ListenTCP(t, world.DeniedV4)

	// 1. Audit: nothing is denied, what would have been is reported.
	j := r.startJob(t, "audit", "INPUT_MODE=audit", "INPUT_ALLOWLIST=allowed.test\n# comment\n", "INPUT_LEARN=true")
	if out, code, _ := j.step(tcpTo("allowed.test", allowedPort)); code != 0 || !strings.Contains(out, "reached allowed.test") {
		t.Fatalf("audit job, allowed host: exit %d\n%s", code, out)
	}
	out, code, sum := j.step(tcpTo("denied.test", deniedPort))
	if code != 0 || !strings.Contains(out, "reached denied.test") {
		t.Fatalf("audit job, new host: exit %d (audit mode denies nothing)\n%s", code, out)
	}
	if !strings.Contains(sum, "denied.test") || !strings.Contains(sum, "would be refused") || !strings.Contains(sum, "__run_2") {
		t.Errorf("the audit step's summary does not name denied.test as would-be-refused:\n%s", sum)
	}
	jobSum := j.finish(r)
	for _, want := range []string{"audit mode", "`__run_2`", "denied.test", "Suggested allowlist"} {
		if !strings.Contains(jobSum, want) {
			t.Errorf("audit job summary lacks %q", want)
		}
	}
	if strings.Contains(strings.Split(jobSum, "Suggested")[0], "`__run`") {
		t.Errorf("the summary lists the step that reached only allowed hosts:\n%s", jobSum)
	}
	learned := filepath.Join(j.dir, "sluice", "learned-allowlist.json")
	b, err := os.ReadFile(learned)
	if err != nil {
		t.Fatalf("learn: %v", err)
	}
	if !strings.Contains(string(b), `"allowed.test"`) || !strings.Contains(string(b), `"denied.test"`) {
		t.Fatalf("learned allowlist lacks a host the job needed:\n%s", b)
	}
	for _, f := range []string{"audit.jsonl", "daemon-audit.jsonl"} {
		if _, err := os.Stat(filepath.Join(j.dir, "sluice", f)); err != nil {
			t.Errorf("no %s to keep as an artifact: %v", f, err)
		}
	}
	committed := filepath.Join(r.base, "network_allowlist.json")
	if err := os.WriteFile(committed, b, 0o644); err != nil {
		t.Fatal(err)
	}

	// 2. Block with the committed allowlist: the same steps pass.
	j = r.startJob(t, "block", "INPUT_MODE=block", "INPUT_ALLOWLIST="+committed)
	if out, code, _ := j.step(tcpTo("allowed.test", allowedPort) + tcpTo("denied.test", deniedPort)); code != 0 {
		t.Fatalf("block job with the learned allowlist: exit %d\n%s", code, out)
	}
	if s := j.finish(r); !strings.Contains(s, "Nothing was refused") {
		t.Errorf("block job summary with nothing refused:\n%s", s)
	}

	// 3. A later job needs a new host: the step fails and says why and
	// what to add; nothing reaches the world.
	j = r.startJob(t, "later", "INPUT_MODE=block", "INPUT_ALLOWLIST="+committed)
	if _, code, _ := j.step(tcpTo("allowed.test", allowedPort)); code != 0 {
		t.Fatalf("later job, allowed host: exit %d", code)
	}
	start := time.Now()
	// What an earlier (confined) step could have written to $GITHUB_ENV
	// changes nothing: sluice-shell takes its settings from a root-owned
	// file and is static.
	out, code, sum = j.step("getent hosts new.test || true\n"+tcpTo("203.0.113.20", deniedPort),
		"SLUICE_SOCKET=/nonexistent", "SLUICE_CI_MODE=audit", "SLUICE=/bin/true", "LD_PRELOAD=/nonexistent.so")
	if code == 0 {
		t.Fatalf("a step reaching a host the allowlist lacks passed in block mode:\n%s", out)
	}
	for _, want := range []string{"sluice: denied", "203.0.113.20", "add to the allowlist", "new.test"} {
		if !strings.Contains(out, want) {
			t.Errorf("the failing step's output lacks %q", want)
		}
	}
	if !strings.Contains(sum, "new.test") || !strings.Contains(sum, "refused") {
		t.Errorf("the failing step's summary does not name new.test:\n%s", sum)
	}
	r.w.AssertNothingArrived(t, world.All(world.Since(start), world.To(world.DeniedV4)), 300*time.Millisecond)
	// Nor can a step ask the daemon for an audit-mode session, which
	// would deny nothing.
	start = time.Now()
	out, code, _ = j.step(`"$SLUICE" run --audit -- bash -c ` + shq(tcpTo("203.0.113.20", deniedPort)))
	if code == 0 || !strings.Contains(out, "may not start an audit-mode session") {
		t.Errorf("a confined step started an audit-mode session: exit %d\n%s", code, out)
	}
	r.w.AssertNothingArrived(t, world.All(world.Since(start), world.To(world.DeniedV4)), 300*time.Millisecond)
	jobSum = j.finish(r)
	for _, want := range []string{"block mode", "`__run_2`", "new.test", "203.0.113.20", "refused"} {
		if !strings.Contains(jobSum, want) {
			t.Errorf("later job summary lacks %q", want)
		}
	}
}

// gitlabLines returns the commands of a list (before_script,
// after_script) of the .sluice template.
func gitlabLines(t *testing.T, key string) []string {
	t.Helper()
	b, err := os.ReadFile("gitlab/sluice.gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case line == "  "+key+":":
			in = true
		case in && strings.HasPrefix(line, "    - "):
			out = append(out, strings.TrimPrefix(line, "    - "))
		case in:
			in = false
		}
	}
	if len(out) == 0 {
		t.Fatalf("the template has no %s", key)
	}
	return out
}

// TestGitLabTemplate runs the .sluice template's before_script, two
// confined script lines and its after_script: the line that reaches an
// allowed host passes, the one that reaches another fails with the
// explanation and the entry it needs, and the job log's summary and the
// artifact directory name it.
func TestGitLabTemplate(t *testing.T) {
	r := newRunner(t)
	allowedPort := r.w.ListenTCP(t, world.AllowedV4)
	deniedPort := r.w.ListenTCP(t, world.DeniedV4)
	project := filepath.Join(r.base, "project")
	if err := os.MkdirAll(project, 0o777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(project, 0o777)
	state := "/run/" + instance + "-gitlab"
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(project, ".sluice", "daemon.pid")); err == nil {
			if p, err := os.FindProcess(atoi(string(b))); err == nil {
				_ = p.Kill()
			}
			time.Sleep(100 * time.Millisecond)
		}
		c := exec.Command(sluiceBin, "cleanup", "--state-dir", state)
		c.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance)
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("sluice cleanup: %v: %s", err, out)
		}
	})
	vars := []string{"PATH=" + filepath.Join(r.prefix, "bin") + ":" + os.Getenv("PATH"), "SLUICE_INSTANCE=" + instance,
		"CI_PROJECT_DIR=" + project, "CI_JOB_NAME=agent", "SLUICE_CI_DIR=" + filepath.Join(project, ".sluice"),
		"SLUICE_CI_MODE=block", "SLUICE_CI_LEARN=false", "SLUICE_CI_ALLOWLIST=allowed.test",
		"SLUICE_CI_STATE_DIR=" + state, "SLUICE_CI_GROUP=65534", "SLUICE_CI_DAEMON_FLAGS=--dns-upstream " + dnsAddr}
	// The runner's shell: before_script as the job's user with sudo
	// (here root), the script lines as the job's user (65534).
	shell := func(asNobody bool, line string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		argv := []string{"bash", "-c", line}
		if asNobody {
			argv = append([]string{"setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--"}, argv...)
		}
		c := r.w.ClientCmd(ctx, argv[0], argv[1:]...)
		c.Env, c.Dir, c.WaitDelay = vars, project, 5*time.Second
		var b bytes.Buffer
		c.Stdout, c.Stderr = &b, &b
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		t.Logf("$ %s\nexit %d\n%s", line, code, b.String())
		return b.String(), code
	}
	for _, line := range gitlabLines(t, "before_script") {
		if _, code := shell(false, line); code != 0 {
			t.Fatalf("before_script %q: exit %d", line, code)
		}
	}
	if out, code := shell(true, "sluice-ci run -- bash -c "+shq(tcpTo("allowed.test", allowedPort))); code != 0 || !strings.Contains(out, "reached allowed.test") {
		t.Fatalf("a script line reaching an allowed host: exit %d", code)
	}
	start := time.Now()
	out, code := shell(true, "SLUICE_CI_STEP=fetch sluice-ci run -- bash -c "+shq(tcpTo("denied.test", deniedPort)))
	if code == 0 {
		t.Fatalf("a script line reaching a host the allowlist lacks passed")
	}
	for _, want := range []string{"refused DNS query for denied.test", "step 'fetch'", "add to the allowlist", "    denied.test"} {
		if !strings.Contains(out, want) {
			t.Errorf("the failing line's output lacks %q", want)
		}
	}
	r.w.AssertNothingArrived(t, world.All(world.Since(start), world.To(world.DeniedV4)), 300*time.Millisecond)
	var log string
	for _, line := range gitlabLines(t, "after_script") {
		o, code := shell(false, line)
		if code != 0 {
			t.Fatalf("after_script %q: exit %d", line, code)
		}
		log += o
	}
	for _, want := range []string{"block mode", "`fetch`", "denied.test", "refused", "Suggested allowlist"} {
		if !strings.Contains(log, want) {
			t.Errorf("the job log's summary lacks %q", want)
		}
	}
	for _, f := range []string{"summary.md", "audit.jsonl", "daemon-audit.jsonl", "suggested-allowlist.json"} {
		if _, err := os.Stat(filepath.Join(project, ".sluice", f)); err != nil {
			t.Errorf("artifact file %s: %v", f, err)
		}
	}
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
