// SPDX-License-Identifier: Apache-2.0

//go:build unix

// Command sluice-shell is the shell of a confined CI job's steps: GitHub
// Actions runs every `run:` step's script with it when the job says
//
//	defaults:
//	  run:
//	    shell: /usr/local/bin/sluice-shell {0}
//
// It runs the script as GitHub's own bash line does (bash --noprofile
// --norc -eo pipefail FILE), inside a sluice session of the job's daemon,
// with an audit log per step, then has `sluice-ci report` add the step's
// denials to the step summary and, when the step failed on a refusal, say
// which allowlist entries it would have needed.
//
// Decisions:
//   - A static Go program, not a script. The runner starts the wrapper with
//     the environment that earlier steps wrote to $GITHUB_ENV and
//     $GITHUB_PATH, and those steps are the confined ones: a dynamically
//     linked shell would honour an LD_PRELOAD they set, and bash a BASH_ENV,
//     before anything was confined. Go's static binary reads neither.
//   - Its settings (the sluice binary, the daemon's socket, the mode, the
//     job's directory) come from a root-owned file beside it,
//     ../etc/sluice-ci.conf, written by `sluice-ci setup`, never from the
//     environment, so a step cannot switch later steps to audit mode or to
//     another binary. The file must be owned by root and writable by no
//     one else, or the step does not run.
//   - The step's own environment reaches its script unchanged (it is
//     confined), except SLUICE_SOCKET, which is the job's daemon, and the
//     runner's file commands ($GITHUB_ENV, $GITHUB_PATH, $GITHUB_OUTPUT,
//     $GITHUB_STATE, $GITHUB_STEP_SUMMARY): the step writes private
//     copies, and only when it has ended does this program, outside the
//     session, append to the runner's files what later steps may get
//     (filecmd.go). The runner's files are read-only in every session, so
//     a step cannot write them directly either.
//   - The report runs with a clean environment.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// confName is the settings file, relative to the directory above the
// wrapper's own (prefix/bin/sluice-shell -> prefix/etc/sluice-ci.conf).
const confName = "etc/sluice-ci.conf"

// cleanPath is the PATH of the report.
const cleanPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func main() { os.Exit(run()) }

func run() int {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sluice-shell SCRIPT   (GitHub Actions: shell: /usr/local/bin/sluice-shell {0})")
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	conf := filepath.Join(filepath.Dir(filepath.Dir(exe)), confName)
	cfg, err := readConfig(conf)
	if err != nil {
		return fail(err)
	}
	label := stepLabel(os.Getenv("GITHUB_ACTION"))
	base, err := stepBase(filepath.Join(cfg["dir"], "steps"), label)
	if err != nil {
		return fail(err)
	}
	args := []string{"run", "--audit-log", base + ".jsonl", "--suggest-allowlist", base + ".suggested.json"}
	if cfg["mode"] == "audit" {
		args = append(args, "--audit")
	}
	// confine=job: the step runs inside the runner worker's session, whose
	// policy adds the runner's own endpoints; the step's session narrows
	// it back to the job's allowlist.
	if cfg["confine"] == "job" {
		args = append(args, "--allowlist", filepath.Join(cfg["ctl"], "steps-allowlist.json"))
	}
	args = append(args, "--", "bash", "--noprofile", "--norc", "-eo", "pipefail", os.Args[1])
	cmd := exec.Command(cfg["sluice"], args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = withEnv(os.Environ(), "SLUICE_SOCKET", cfg["socket"])
	fc, err := newFileCommands(os.Getenv("RUNNER_TEMP"))
	if err != nil {
		return fail(err)
	}
	defer fc.remove()
	cmd.Env = fc.env(cmd.Env)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s) // sluice forwards it to the session
		}
	}()
	code := 0
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return fail(err)
		}
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	signal.Stop(sigs)
	if err := fc.apply(os.Stderr, readProtected(cfg["ctl"]), writableByMe); err != nil {
		fmt.Fprintf(os.Stderr, "sluice-shell: the step's file commands: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	rep := exec.Command(cfg["sluice-ci"], "report", base, label, strconv.Itoa(code))
	rep.Env = []string{"PATH=" + cleanPath, "SLUICE=" + cfg["sluice"], "SLUICE_CI_DIR=" + cfg["dir"],
		"SLUICE_CI_MODE=" + cfg["mode"], "SLUICE_CI_STEP_SUMMARY=" + os.Getenv("GITHUB_STEP_SUMMARY")}
	rep.Stdout, rep.Stderr = os.Stderr, os.Stderr
	if err := rep.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "sluice-shell: the step's report: %v\n", err)
	}
	return code
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "sluice-shell:", err)
	return 125
}

// readConfig reads KEY=VALUE lines from a file that only root may write.
func readConfig(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w (did the sluice setup step run?)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%s: must be owned by root and writable by no one else", path)
	}
	cfg := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			cfg[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range []string{"sluice", "sluice-ci", "socket", "dir", "mode"} {
		if cfg[k] == "" {
			return nil, fmt.Errorf("%s: no %s=", path, k)
		}
	}
	if cfg["mode"] != "audit" && cfg["mode"] != "block" {
		return nil, fmt.Errorf("%s: mode=%q: want audit or block", path, cfg["mode"])
	}
	return cfg, nil
}

// stepLabel makes a file-name-safe step label ("__run_2").
func stepLabel(s string) string {
	if s == "" {
		s = "step"
	}
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// stepBase is steps/NNN-label for the next step.
func stepBase(dir, label string) (string, error) {
	logs, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, fmt.Sprintf("%03d-%s", len(logs)+1, label)), nil
}

// withEnv sets key=value in env, replacing any earlier value.
func withEnv(env []string, key, value string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, key+"=") {
			out = append(out, e)
		}
	}
	return append(out, key+"="+value)
}
