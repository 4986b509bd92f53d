// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// TestGoInstallFromTheModule: `go install
// github.com/sluice-dev/sluice/cmd/sluice@VERSION` builds sluice from the
// module as the Go proxy would serve it (a zip of the tracked files, with
// nested modules such as packaging/nfpm left out), with no clang and no
// generate step: the BPF object is committed. The module is served from a
// file proxy; its dependencies come from the module cache, nothing from
// the network.
func TestGoInstallFromTheModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sluice")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	src := filepath.Join(t.TempDir(), "src")
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(src, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const path, version = "github.com/sluice-dev/sluice", "v0.0.1-test"
	proxy := t.TempDir()
	dir := filepath.Join(proxy, path, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	z, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zip.CreateFromDir(z, module.Version{Path: path, Version: version}, src); err != nil {
		t.Fatalf("module zip: %v", err)
	}
	z.Close()
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		version + ".mod":  gomod,
		version + ".info": []byte(`{"Version":"` + version + `","Time":"2026-01-01T00:00:00Z"}`),
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gobin := t.TempDir()
	c := exec.Command("go", "install", path+"/cmd/sluice@"+version)
	c.Dir = t.TempDir() // outside any module
	// A module cache of its own, so a copy of this test version left by an
	// earlier run (the go command never re-reads a cached version) cannot
	// stand in for today's tree; the dependencies come from the machine's
	// module cache, served as a second file proxy.
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := filepath.Join(strings.TrimSpace(string(modcache)), "cache", "download")
	c.Env = append(os.Environ(), "GOBIN="+gobin, "GOMODCACHE="+t.TempDir(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(deps)+",off",
		"GOSUMDB=off", "GOFLAGS=-modcacherw", "GOWORK=off")
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil {
		t.Fatalf("go install %s/cmd/sluice@%s: %v\n%s", path, version, err, out.String())
	}
	bin := filepath.Join(gobin, "sluice")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	v, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(v), "sluice "+version+" ") {
		t.Fatalf("the installed sluice: %v: %s", err, v)
	}
	t.Logf("%s", v)
}
