// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/tests/needs"
)

// testEnforcer opens an enforcer of the test's own (its cgroup root, pins
// and state directory named prefix-<random>), removed at the test's end.
func testEnforcer(t *testing.T, prefix string) *Enforcer {
	t.Helper()
	needs.Have(t, needs.Kernel...)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := prefix + "-" + hex.EncodeToString(rnd[:])
	cfg := Config{CgroupName: name, PinDir: filepath.Join(filepath.Dir(loader.DefaultPinDir), name), StateDir: t.TempDir()}
	e, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Close()
		if err := loader.Remove(cfg.PinDir); err != nil {
			t.Errorf("remove pins: %v", err)
		}
		if err := e.Root().Remove(); err != nil {
			t.Errorf("remove root: %v", err)
		}
	})
	return e
}
