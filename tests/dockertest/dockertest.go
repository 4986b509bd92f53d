// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Package dockertest gives a test its own Docker engine and the local
// images it needs, with no effect on the host's network, and registries
// of its own on loopback to pull from and push to (registry.go).
//
// Each Start launches a private dockerd (data root, exec root, socket and
// pid file in a directory of its own, so that test runs never collide)
// that leaves the host's networking alone: no bridge, no iptables rules,
// no forwarding, no masquerading. Containers therefore get --network none
// or a network namespace the test built (tests/world): nothing can reach
// an outside address. The engine is stopped by its pid, and everything it
// mounted is unmounted, in t.Cleanup.
//
// Images come from tests/docker/images.sh, the one script that makes them
// for every docker test and for CI: a debootstrap minbase image, the same
// plus the host's Go toolchain, and this checkout's Dockerfile built from
// the two. The debootstrap tarball is cached across engines and test runs
// of one CI job (SLUICE_DOCKER_CACHE).
package dockertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Local image names made by tests/docker/images.sh.
const (
	BaseImage   = "sluice-ci/debian:bookworm"
	GoImage     = "sluice-ci/golang:bookworm"
	SluiceImage = "sluice-ci/sluice:test"
)

// Engine is a private Docker engine for one test.
type Engine struct {
	// Host is the DOCKER_HOST value that reaches it.
	Host string
	// Dir holds its state.
	Dir    string
	daemon *exec.Cmd
	log    *bytes.Buffer
	hold   chan struct{} // closed when the engine is stopped
}

// Missing names what a docker test needs and this machine lacks (dockerd,
// the docker client, debootstrap, root), or "".
func Missing() string {
	if os.Geteuid() != 0 {
		return "root"
	}
	for _, bin := range []string{"dockerd", "docker", "containerd", "runc", "debootstrap"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " (apt-get install docker.io debootstrap)"
		}
	}
	return ""
}

// Start launches a private engine, or skips the test when the machine
// cannot run one.
func Start(t testing.TB) *Engine {
	t.Helper()
	if m := Missing(); m != "" {
		// CI sets SLUICE_REQUIRE_KERNEL=1: there a docker test must run.
		if os.Getenv("SLUICE_REQUIRE_KERNEL") == "1" {
			t.Fatalf("docker tests need %s (SLUICE_REQUIRE_KERNEL=1)", m)
		}
		t.Skipf("docker tests need %s", m)
	}
	// Short paths: the containerd socket lives under the exec root, and
	// unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("/var/tmp", "sluice-dockerd-")
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{Dir: dir, Host: "unix://" + filepath.Join(dir, "docker.sock"), log: &bytes.Buffer{}}
	t.Cleanup(func() { e.stop(t) })
	e.daemon = exec.Command("dockerd",
		"--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-forward=false", "--ip-masq=false",
		"--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "docker.pid"), "-H", e.Host)
	e.daemon.Stdout, e.daemon.Stderr = e.log, e.log
	// Its own process group, so that stop reaches its containerd too. The
	// parent-death signal belongs to the thread that forks, and Go ends
	// threads that other code locked and left (netns switching does): so
	// dockerd is forked from a thread of its own, held until the test's
	// end, and dies with the test binary, never earlier.
	e.daemon.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	e.hold = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		started <- e.daemon.Start()
		<-e.hold
	}()
	if err := <-started; err != nil {
		t.Fatalf("start dockerd: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := e.Docker(context.Background(), "version", "--format", "{{.Server.Version}}"); err == nil {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("dockerd did not answer within 60 s:\n%s", e.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop ends the engine this test started (its process group, by pid),
// then unmounts whatever it left mounted and removes its directory.
func (e *Engine) stop(t testing.TB) {
	if e.daemon != nil && e.daemon.Process != nil {
		// Containers first, so that no container outlives its engine.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if ids, err := e.Docker(ctx, "ps", "-aq"); err == nil && strings.TrimSpace(ids) != "" {
			_, _ = e.Docker(ctx, append([]string{"rm", "-f"}, strings.Fields(ids)...)...)
		}
		// Then its bridge networks: a bridge the engine made stays in
		// the host's network namespace after the engine, holding its
		// address pool, and enough of them leave later engines none.
		bridges, _ := e.Docker(ctx, "network", "ls", "-q", "--no-trunc", "--filter", "driver=bridge")
		_, _ = e.Docker(ctx, "network", "prune", "-f")
		cancel()
		defer removeBridges(strings.Fields(bridges))
		pgid := e.daemon.Process.Pid
		_ = unix.Kill(pgid, unix.SIGTERM)
		done := make(chan struct{})
		go func() { _ = e.daemon.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = unix.Kill(-pgid, unix.SIGKILL)
			<-done
		}
		// containerd and its shims, started by this dockerd, are in its
		// process group.
		_ = unix.Kill(-pgid, unix.SIGKILL)
		close(e.hold)
	}
	unmountUnder(e.Dir)
	if err := os.RemoveAll(e.Dir); err != nil {
		t.Logf("remove %s: %v", e.Dir, err)
	}
	if t.Failed() && e.log != nil {
		t.Logf("dockerd log:\n%s", tail(e.log.String(), 4000))
	}
}

// removeBridges deletes the links of the engine's bridge networks (ids)
// that outlived it, by the name the engine gives them (br-<12 of the id>).
func removeBridges(ids []string) {
	for _, id := range ids {
		if len(id) < 12 {
			continue
		}
		if l, err := netlink.LinkByName("br-" + id[:12]); err == nil {
			_ = netlink.LinkDel(l)
		}
	}
}

// unmountUnder lazily unmounts every mount point below dir, deepest first.
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

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// Docker runs the docker client against the engine and returns its
// standard output; the error carries standard error.
func (e *Engine) Docker(ctx context.Context, args ...string) (string, error) {
	return e.DockerWith(ctx, nil, args...)
}

// DockerWith is Docker with more environment variables (DOCKER_BUILDKIT).
func (e *Engine) DockerWith(ctx context.Context, env []string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, "docker", args...)
	c.Env = append(append(os.Environ(), "DOCKER_HOST="+e.Host), env...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return out.String(), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// Image makes one of the local images (base, go or sluice) with
// tests/docker/images.sh, bounded by timeout. env adds variables, e.g.
// DOCKER_BUILDKIT=0.
func (e *Engine) Image(t testing.TB, which string, timeout time.Duration, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", filepath.Join(RepoRoot(), "tests", "docker", "images.sh"), which)
	c.Env = append(append(os.Environ(), "DOCKER_HOST="+e.Host), env...)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("images.sh %s: %v\n%s", which, err, out)
	}
}

// RepoRoot is the checkout this package was built from.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}
