// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/enforcer"
)

// nobody is whom every measured program runs as, in both arms: sluice never
// runs a command as root, so the unconfined arm must not either.
var nobody = cgroups.SpawnOptions{UID: 65534, GID: 65534}

// workerNice is the worker's nice value: well ahead of ordinary (0) work,
// without real-time scheduling, which could starve the machine.
const workerNice = -10

// workerTimeout bounds one worker run; a healthy one takes well under a
// second.
const workerTimeout = 30 * time.Second

// starter spawns a command into a cgroup: *enforcer.Session (confined) and
// *cgroups.Session (a cgroup without sluice's programs) both are one, which
// is what makes the two arms take the same spawn path.
type starter interface {
	Start(cmd *exec.Cmd, spawn cgroups.SpawnOptions) error
}

// confinedArm is the confined arm's starter: the session's raw Spawn,
// without the shim and environment that enforcer.Session.Start adds, so
// that both arms spawn the worker alike.
type confinedArm struct{ s *enforcer.Session }

func (c confinedArm) Start(cmd *exec.Cmd, spawn cgroups.SpawnOptions) error {
	return c.s.Spawn(cmd, spawn)
}

// buildWorker compiles tests/bench/worker into dir.
func buildWorker(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "worker")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/sluice-dev/sluice/tests/bench/worker")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build the worker (run from inside the sluice module): %w%s", err, quoteOutput(stderr.String()))
	}
	return out, nil
}

// runWorker runs the worker once in s and returns the ns/op it printed.
// With newNet the worker gets a fresh network namespace of its own, which
// has no interface but a loopback that is down; prepare, when not nil, is
// then called with the worker's pid once it runs, to configure that
// namespace from outside (the worker, as uid 65534, cannot).
func runWorker(ctx context.Context, s starter, worker string, newNet bool, prepare func(pid int) error, args ...string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, workerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, worker, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if newNet {
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	}
	what := "worker " + strings.Join(args, " ")
	if len(what) > 60 {
		what = what[:60] + "..."
	}
	if err := s.Start(cmd, nobody); err != nil {
		return 0, fmt.Errorf("start %s: %w", what, err)
	}
	// Other work on the machine (builds, test suites) is the main source of
	// noise; a higher priority keeps most of it off the measured thread.
	// Both arms get it, so it changes no ratio by itself.
	if err := unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, workerNice); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, fmt.Errorf("raise the priority of %s: %w", what, err)
	}
	if prepare != nil {
		if err := prepare(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return 0, fmt.Errorf("prepare %s: %w%s", what, err, quoteOutput(stderr.String()))
		}
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return 0, fmt.Errorf("%s: %w%s", what, err, quoteOutput(stderr.String()))
	}
	ns, err := strconv.ParseFloat(strings.TrimSpace(stdout.String()), 64)
	if err != nil || ns <= 0 {
		return 0, fmt.Errorf("%s printed %q, want ns/op", what, stdout.String())
	}
	return ns, nil
}

// freeCgroup is the unconfined arm's cgroup: a session under a parent that
// is a sibling of the instance's, with no sluice program attached.
type freeCgroup struct {
	root *cgroups.Root
	sess *cgroups.Session
}

func openFreeCgroup(name string) (*freeCgroup, error) {
	root, err := cgroups.OpenRoot(name)
	if err != nil {
		return nil, fmt.Errorf("unconfined cgroup %s: %w", name, err)
	}
	f := &freeCgroup{root: root}
	// Leftovers of a run that was killed before its cleanup.
	if old, err := root.Sessions(); err == nil {
		for _, s := range old {
			_ = s.Remove(cgroups.DefaultRemoveTimeout)
		}
	}
	if f.sess, err = root.NewSession(fmt.Sprintf("worker-%d", os.Getpid())); err != nil {
		f.Close()
		return nil, fmt.Errorf("unconfined cgroup session: %w", err)
	}
	return f, nil
}

// Close kills what is left in the cgroup and removes it and its parent.
func (f *freeCgroup) Close() error {
	var err error
	if f.sess != nil {
		err = f.sess.Remove(cgroups.DefaultRemoveTimeout)
	}
	if rerr := f.root.Remove(); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// quoteOutput appends what a failed command printed to its error, if
// anything.
func quoteOutput(out string) string {
	if out = strings.TrimSpace(out); out == "" {
		return ""
	}
	return ": " + out
}
