// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"testing"

	"github.com/sluice-dev/sluice/tests/needs"
)

// TestSocketFamiliesOutsideTheDatapath: the cgroup hooks judge inet sockets
// only; AF_VSOCK (a way to the hypervisor's host) and AF_PACKET are refused
// at socket(2) by BPF mode's seccomp filter, while inet and unix sockets
// still work. The twin shows the same user can create them unconfined.
func TestSocketFamiliesOutsideTheDatapath(t *testing.T) {
	w := newWorld(t)
	const afVsock, afUnix, afInet, sockStream, sockDgram = "40", "1", "2", "1", "2"
	twin := w.RunProbe(t, nobody, "socket", afVsock, sockStream)
	if !twin.OK {
		needs.Absent(t, "AF_VSOCK sockets are not available here even unconfined (%s)", twin.Error)
	}
	r, _ := confinedProbe(t, w, defaultPolicy, nil, "socket", afVsock, sockStream)
	if r.OK || r.Errno != "EAFNOSUPPORT" {
		t.Fatalf("confined AF_VSOCK socket: want EAFNOSUPPORT, got %s", r)
	}
	for _, ok := range [][2]string{{afUnix, sockStream}, {afInet, sockStream}, {afInet, sockDgram}} {
		if r, _ := confinedProbe(t, w, defaultPolicy, nil, "socket", ok[0], ok[1]); !r.OK {
			t.Errorf("confined socket(%s, %s) should work: %s", ok[0], ok[1], r)
		}
	}
}
