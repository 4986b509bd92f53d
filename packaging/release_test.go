// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReleaseBinaryIsReproducible builds the linux/amd64 release binary
// the way `make release` does (packaging/release.sh --binary), once from
// this checkout and once from a copy of its tracked files at another path,
// and requires identical bytes: no paths, build ids, VCS stamps or dates
// in the binary. (The packages were checked the same way by hand; they
// take their times from SOURCE_DATE_EPOCH.)
func TestReleaseBinaryIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sluice twice")
	}
	if runtime.GOOS != "linux" {
		t.Skip("release.sh runs on Linux")
	}
	root, copyDir := copyCheckout(t)
	version := "v0.0.0-reproducible"
	build := func(dir, out string) string {
		t.Helper()
		c := exec.Command("bash", "packaging/release.sh", "--binary", "linux/amd64", out)
		c.Dir = dir
		c.Env = append(os.Environ(), "VERSION="+version)
		var errb bytes.Buffer
		c.Stderr = &errb
		if err := c.Run(); err != nil {
			t.Fatalf("release.sh --binary in %s: %v\n%s", dir, err, errb.String())
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(dir)) {
			t.Errorf("the binary built in %s contains that path", dir)
		}
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	out := t.TempDir()
	a := build(root, filepath.Join(out, "a"))
	b := build(copyDir, filepath.Join(out, "b"))
	if a != b {
		t.Fatalf("two builds of the same source differ: %s (in %s) and %s (in %s)", a, root, b, copyDir)
	}
	t.Logf("sha256 %s, twice", a)
}

// copyCheckout copies the tracked files of this checkout (as they are in
// the work tree) to a new directory and returns the checkout's root and
// the copy.
func copyCheckout(t *testing.T) (root, copyDir string) {
	t.Helper()
	var err error
	root, err = filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	copyDir = filepath.Join(t.TempDir(), "elsewhere", "sluice")
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree
			}
			t.Fatal(err)
		}
		fi, _ := os.Stat(filepath.Join(root, f))
		dst := filepath.Join(copyDir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return root, copyDir
}

// TestReleaseShowsNfpmErrors: when nfpm cannot build a package, release.sh
// fails and shows nfpm's own message, which it keeps quiet on success.
func TestReleaseShowsNfpmErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sluice")
	}
	if runtime.GOOS != "linux" {
		t.Skip("release.sh runs on Linux")
	}
	_, dir := copyCheckout(t)
	cfg := filepath.Join(dir, "packaging", "nfpm.yaml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A contents entry whose source does not exist: nfpm refuses it.
	broken := strings.Replace(string(b), "contents:\n", "contents:\n  - src: /nonexistent/sluice-release-test\n    dst: /usr/share/sluice-missing\n", 1)
	if broken == string(b) {
		t.Fatal("nfpm.yaml has no contents: section to break")
	}
	if err := os.WriteFile(cfg, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("bash", "packaging/release.sh", "--deb", filepath.Join(t.TempDir(), "dist"))
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err == nil {
		t.Fatalf("release.sh succeeded with a broken nfpm.yaml:\n%s", out)
	}
	if !strings.Contains(string(out), "nfpm could not build the deb package") || !strings.Contains(string(out), "sluice-release-test") {
		t.Errorf("release.sh failed without nfpm's reason:\n%s", out)
	}
}
