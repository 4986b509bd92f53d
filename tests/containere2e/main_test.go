// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"os"
	"testing"

	"github.com/sluice-dev/sluice/tests/world"
)

func TestMain(m *testing.M) {
	code := m.Run()
	world.RemoveProbe()
	os.Exit(code)
}
