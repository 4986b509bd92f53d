// SPDX-License-Identifier: Apache-2.0

//go:build linux

package systemd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/criworld"
	"github.com/sluice-dev/sluice/tests/world"
)

// TestKubernetesNodeSystemdDriver boots systemd on a pure cgroup v2 tree,
// runs containerd in it with runc's systemd cgroup driver (a node whose
// kubelet has cgroupDriver: systemd) and `sluice node` on its NRI socket,
// and runs inside-kubernetes.sh: a pod of a guarded namespace, made with
// crictl with the slice kubepods-besteffort-pod<uid>.slice as its cgroup
// parent, lands below kubepods.slice and is confined (refused a world host
// its unconfined twin in an unguarded namespace reaches, nothing recorded
// by the world's server), through a kill -9 and a restart of the agent,
// and a pod made after the restart is confined too.
func TestKubernetesNodeSystemdDriver(t *testing.T) {
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root (systemd-nspawn, bpffs, containerd)")
	}
	// bootAndRun checks these too, but only after the tools' build, which
	// takes minutes the first time.
	for _, tool := range []string{"systemd-nspawn", "debootstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, "needs %s (apt-get install systemd-container debootstrap)", tool)
		}
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		skipOrFail(t, "needs ip on the host, copied into the booted system (apt-get install iproute2)")
	}
	bins := criworld.Tools(t)
	// The image's /probe is built once per process; this test is its only
	// user here.
	t.Cleanup(world.RemoveProbe)
	imageDir := t.TempDir()
	image := criworld.WriteTestImage(t, imageDir)
	// Copying, and a small build on a machine that may be busy.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	setup := func(root string) {
		// containerd, its shim, ctr and crictl are static; the host's runc
		// (and ip) need their libraries.
		for _, p := range []string{bins.Containerd, bins.Shim, bins.Ctr, bins.Crictl, bins.Runc} {
			copyFile(t, p, filepath.Join(root, "usr/local/bin", filepath.Base(p)), 0o755)
			copyLibs(t, ctx, p, root)
		}
		copyFile(t, ip, filepath.Join(root, "usr/local/sbin/ip"), 0o755)
		copyLibs(t, ctx, ip, root)
		copyFile(t, image, filepath.Join(root, "image.tar"), 0o644)
		// The runtime the script uses where its cgroup v2 tree has no
		// controllers (see runcnolimits).
		build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(root, "usr/local/bin/runcnolimits"), "./tests/systemd/runcnolimits")
		build.Dir = repoRoot(t)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build runcnolimits: %v\n%s", err, out)
		}
		if err := os.WriteFile(filepath.Join(root, "k8s.env"), []byte("IMAGE="+criworld.TestImage+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// containerd and runc need every capability, and runc the session
	// keyring system calls nspawn's own filter refuses (as Docker's do).
	bootAndRun(t, "inside-kubernetes.sh", setup, []string{"--capability=all",
		"--system-call-filter=keyctl add_key request_key"})
}
