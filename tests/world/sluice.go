// SPDX-License-Identifier: Apache-2.0

//go:build linux

package world

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// SluiceForTests builds the sluice binary into a directory other users can
// read (confined commands run as uid 65534) and picks a random instance
// name (SLUICE_INSTANCE), so a test binary never touches a real
// installation. cleanup runs `sluice cleanup` for the instance and removes
// the binary; call it after m.Run.
func SluiceForTests(prefix string) (bin, instance string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", prefix+"-")
	if err != nil {
		return "", "", nil, err
	}
	_ = os.Chmod(dir, 0o755)
	bin = filepath.Join(dir, "sluice")
	build := exec.Command("go", "build", "-o", bin, "github.com/sluice-dev/sluice/cmd/sluice")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", "", nil, fmt.Errorf("build sluice: %w", err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	instance = prefix + "-" + hex.EncodeToString(rnd[:])
	cleanup = func() {
		c := exec.Command(bin, "cleanup")
		c.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance)
		if out, err := c.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "sluice cleanup %s: %v: %s\n", instance, err, out)
		}
		os.RemoveAll(dir)
	}
	return bin, instance, cleanup, nil
}
