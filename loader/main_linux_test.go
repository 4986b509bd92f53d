// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"os"
	"testing"

	"github.com/sluice-dev/sluice/tests/needs"
)

// TestMain checks the privileged tests' preconditions once: a machine that
// lacks them gets one message naming each with its fix (and, under
// SLUICE_REQUIRE_KERNEL=1, one failure instead of one per test).
func TestMain(m *testing.M) {
	code, ready := needs.Main(m, "loader", needs.Datapath...)
	if ready {
		code = m.Run()
	}
	os.Exit(code)
}
