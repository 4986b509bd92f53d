// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"strings"
	"testing"
)

// The hybrid layout of a Docker host, seen from a container with the host's
// cgroup tree bind-mounted and the host's cgroup namespace.
const hybridMountInfo = `25 1 254:0 / / rw - ext4 /dev/vda rw
30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw
31 30 0:27 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
32 30 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
33 30 0:29 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd
34 30 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
35 30 0:31 /docker/abc /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
`

const containerCgroups = `9:name=systemd:/docker/abc
8:pids:/docker/abc
4:memory:/docker/abc
1:cpu:/
0::/sluice/run-1
`

func TestV1MovesLeaveTheContainersV1Cgroups(t *testing.T) {
	entries, err := parseMountInfo(strings.NewReader(hybridMountInfo))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range v1Moves(entries, containerCgroups, false) {
		got = append(got, m.mountPoint+"<-"+m.from)
	}
	// cpu is already at its root; pids' root is not visible (mounted from
	// inside /docker/abc); v2 is not v1's business.
	want := "/sys/fs/cgroup/systemd<-/docker/abc /sys/fs/cgroup/memory<-/docker/abc"
	if strings.Join(got, " ") != want {
		t.Errorf("moves = %q, want %q", strings.Join(got, " "), want)
	}
	got = nil
	for _, m := range v1Moves(entries, containerCgroups, true) {
		got = append(got, m.mountPoint)
	}
	if strings.Join(got, " ") != "/sys/fs/cgroup/memory" {
		t.Errorf("with systemd as init, moves = %q: name=systemd must stay", got)
	}
}
