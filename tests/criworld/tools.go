// SPDX-License-Identifier: Apache-2.0

//go:build linux

package criworld

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/needs"
)

// Versions of the tools built from their modules. containerd 2.x is the
// first with NRI on by default and the CRI plugin's config version 3.
const (
	ContainerdVersion = "v2.4.2"
	CriToolsVersion   = "v1.37.0"
)

// CacheDir holds the built tools between runs, keyed by version.
var CacheDir = "/var/cache/sluice-test/cri-bin"

// BuildTimeout bounds a cold build of the tools.
const BuildTimeout = 15 * time.Minute

// Bins are the tools' paths.
type Bins struct {
	Containerd string
	Shim       string // containerd-shim-runc-v2
	Ctr        string
	Crictl     string
	Runc       string
}

var tools struct {
	once sync.Once
	bins Bins
	err  error
}

// Tools builds (once per cache) and returns the tools; a machine without
// runc or Go skips the test (a failure under SLUICE_REQUIRE_KERNEL).
func Tools(t testing.TB) Bins {
	t.Helper()
	tools.once.Do(func() { tools.bins, tools.err = buildTools() })
	if tools.err != nil {
		needs.Skip(t, "criworld: %v", tools.err)
	}
	return tools.bins
}

func buildTools() (Bins, error) {
	runc, err := exec.LookPath("runc")
	if err != nil {
		return Bins{}, fmt.Errorf("no runc in PATH (apt-get install runc; docker.io brings it)")
	}
	dir := filepath.Join(CacheDir, "containerd-"+ContainerdVersion+"_cri-tools-"+CriToolsVersion)
	b := Bins{
		Containerd: filepath.Join(dir, "containerd"),
		Shim:       filepath.Join(dir, "containerd-shim-runc-v2"),
		Ctr:        filepath.Join(dir, "ctr"),
		Crictl:     filepath.Join(dir, "crictl"),
		Runc:       runc,
	}
	if allExist(b.Containerd, b.Shim, b.Ctr, b.Crictl) {
		return b, nil
	}
	if err := os.MkdirAll(CacheDir, 0o755); err != nil {
		return Bins{}, fmt.Errorf("tool cache: %w", err)
	}
	// Build into a fresh directory and rename it into place, so a build
	// cut short never leaves a half cache behind.
	tmp, err := os.MkdirTemp(CacheDir, "build-")
	if err != nil {
		return Bins{}, fmt.Errorf("tool cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	for _, pkgs := range [][]string{
		{"github.com/containerd/containerd/v2/cmd/containerd@" + ContainerdVersion,
			"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@" + ContainerdVersion,
			"github.com/containerd/containerd/v2/cmd/ctr@" + ContainerdVersion},
		{"sigs.k8s.io/cri-tools/cmd/crictl@" + CriToolsVersion},
	} {
		cmd := exec.CommandContext(ctx, "go", append([]string{"install"}, pkgs...)...)
		// Static, and outside any module: go install pkg@version.
		cmd.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0", "GOFLAGS=")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			return Bins{}, fmt.Errorf("go install %v: %w\n%s", pkgs, err, out)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return Bins{}, fmt.Errorf("tool cache: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return Bins{}, fmt.Errorf("tool cache: %w", err)
	}
	if !allExist(b.Containerd, b.Shim, b.Ctr, b.Crictl) {
		return Bins{}, fmt.Errorf("tool cache %s: a tool is missing after the build", dir)
	}
	return b, nil
}

func allExist(paths ...string) bool {
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}
