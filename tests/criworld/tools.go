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
	// CNIPluginsVersion is containernetworking/plugins': ptp, host-local
	// and loopback give pods their own network namespace.
	CNIPluginsVersion = "v1.9.1"
)

// CNIPlugins are the CNI plugins a node with a pod network uses: ptp for
// the pod's veth and routes, host-local for its address, loopback for the
// pod's lo (containerd's CRI attaches it to every pod).
var CNIPlugins = []string{"ptp", "host-local", "loopback"}

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
	// CNIDir holds the CNI plugins (CNIPlugins), the directory a CNI
	// runtime searches.
	CNIDir string
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
	// The CNI plugins have a cache directory of their own, so that adding
	// or bumping them never rebuilds containerd.
	cniDir := filepath.Join(CacheDir, "cni-plugins-"+CNIPluginsVersion)
	b := Bins{
		Containerd: filepath.Join(dir, "containerd"),
		Shim:       filepath.Join(dir, "containerd-shim-runc-v2"),
		Ctr:        filepath.Join(dir, "ctr"),
		Crictl:     filepath.Join(dir, "crictl"),
		Runc:       runc,
		CNIDir:     cniDir,
	}
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	if err := buildInto(ctx, dir, [][]string{
		{"github.com/containerd/containerd/v2/cmd/containerd@" + ContainerdVersion,
			"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@" + ContainerdVersion,
			"github.com/containerd/containerd/v2/cmd/ctr@" + ContainerdVersion},
		{"sigs.k8s.io/cri-tools/cmd/crictl@" + CriToolsVersion},
	}, b.Containerd, b.Shim, b.Ctr, b.Crictl); err != nil {
		return Bins{}, err
	}
	var cniPkgs, cniBins []string
	for _, p := range CNIPlugins {
		kind := "main"
		if p == "host-local" {
			kind = "ipam"
		}
		cniPkgs = append(cniPkgs, "github.com/containernetworking/plugins/plugins/"+kind+"/"+p+"@"+CNIPluginsVersion)
		cniBins = append(cniBins, filepath.Join(cniDir, p))
	}
	if err := buildInto(ctx, cniDir, [][]string{cniPkgs}, cniBins...); err != nil {
		return Bins{}, err
	}
	return b, nil
}

// buildInto builds pkgs (each group one `go install`) into the cache
// directory dir unless every file of want is already there.
func buildInto(ctx context.Context, dir string, pkgs [][]string, want ...string) error {
	if allExist(want...) {
		return nil
	}
	if err := os.MkdirAll(CacheDir, 0o755); err != nil {
		return fmt.Errorf("tool cache: %w", err)
	}
	// Build into a fresh directory and rename it into place, so a build
	// cut short never leaves a half cache behind.
	tmp, err := os.MkdirTemp(CacheDir, "build-")
	if err != nil {
		return fmt.Errorf("tool cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, group := range pkgs {
		cmd := exec.CommandContext(ctx, "go", append([]string{"install"}, group...)...)
		// Static, and outside any module: go install pkg@version.
		cmd.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0", "GOFLAGS=")
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go install %v: %w\n%s", group, err, out)
		}
	}
	// MkdirTemp's 0700 would keep the tools from other users.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("tool cache: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("tool cache: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("tool cache: %w", err)
	}
	if !allExist(want...) {
		return fmt.Errorf("tool cache %s: a tool is missing after the build", dir)
	}
	return nil
}

func allExist(paths ...string) bool {
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}
