// SPDX-License-Identifier: Apache-2.0

//go:build linux

package systemd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// engineBinaries are the Docker engine's programs, copied from the host
// into the booted root file system with the libraries it lacks.
var engineBinaries = []string{"dockerd", "docker", "containerd", "containerd-shim-runc-v2", "runc", "docker-init", "docker-proxy", "ip"}

// TestDockerSystemdDriver boots systemd, runs the host's Docker engine in
// it with native.cgroupdriver=systemd, and runs inside-docker.sh: a
// container given --cgroup-parent=sluice.slice lands in
// sluice.slice/docker-<id>.scope and is confined (refused a world host
// the unconfined twin reaches, nothing recorded by the world's server),
// through a kill -9 of the daemon and a `docker restart`; a labelled
// container with a mistyped parent is frozen and reported, and `sluice
// check` prints the flag for that host.
func TestDockerSystemdDriver(t *testing.T) {
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root (systemd-nspawn, bpffs, a Docker engine)")
	}
	paths := map[string]string{}
	for _, bin := range engineBinaries {
		p, err := exec.LookPath(bin)
		if err != nil {
			skipOrFail(t, "needs %s on the host, copied into the booted system (apt-get install docker.io iproute2)", bin)
		}
		paths[bin] = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	repo := repoRoot(t)
	c := exec.CommandContext(ctx, "bash", filepath.Join(repo, "tests/docker/images.sh"), "rootfs")
	out, err := c.Output()
	if err != nil {
		t.Fatalf("tests/docker/images.sh rootfs: %v", err)
	}
	image := strings.TrimSpace(string(out))
	setup := func(root string) {
		for bin, p := range paths {
			if bin == "ip" {
				continue
			}
			copyFile(t, p, filepath.Join(root, "usr/local/bin", bin), 0o755)
			copyLibs(t, ctx, p, root)
		}
		// ip(8), for the world's addresses on loopback.
		copyFile(t, paths["ip"], filepath.Join(root, "usr/local/sbin/ip"), 0o755)
		copyLibs(t, ctx, paths["ip"], root)
	}
	// The engine needs every capability, and runc the session keyring
	// system calls nspawn's own filter refuses.
	bootAndRun(t, "inside-docker.sh", setup, []string{"--bind-ro=" + image + ":/base.tar", "--capability=all",
		"--system-call-filter=keyctl add_key request_key"})
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// copyLibs copies the shared libraries bin needs that root lacks.
func copyLibs(t *testing.T, ctx context.Context, bin, root string) {
	t.Helper()
	out, err := exec.CommandContext(ctx, "ldd", bin).Output()
	if err != nil {
		return // statically linked
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "=>" || !strings.HasPrefix(f[2], "/") {
			continue
		}
		dst := filepath.Join(root, f[2])
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "usr", f[2])); err == nil {
			continue // /lib is /usr/lib there
		}
		copyFile(t, f[2], filepath.Join(root, "usr", f[2]), 0o644)
	}
}
