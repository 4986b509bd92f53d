// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Package nodee2e tests `sluice node` end to end on one machine with real
// parts: containerd 2.x with its CRI plugin and NRI, pods made with crictl
// under /kubepods/... cgroups as a kubelet makes them (package
// tests/criworld), and the agent connected to containerd's NRI socket.
// containerd runs in the world's client namespace, so every (host-network)
// pod does too: the only routes lead to the test's world, whose servers
// and sniffer record what arrived.
package nodee2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

var sluiceBin string

func TestMain(m *testing.M) {
	code := func() int {
		if code, ready := needs.Main(m, "nodee2e", needs.Kernel...); !ready {
			return code
		}
		bin, _, cleanup, err := world.SluiceForTests("sluice-nodee2e")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cleanup()
		sluiceBin = bin
		defer world.RemoveProbe()
		return m.Run()
	}()
	os.Exit(code)
}
