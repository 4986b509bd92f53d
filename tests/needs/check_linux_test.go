// SPDX-License-Identifier: Apache-2.0

//go:build linux

package needs

import "testing"

func TestCgroup2Mount(t *testing.T) {
	const hybrid = `35 24 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
36 35 0:31 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
37 35 0:32 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
`
	if dir, rw := cgroup2Mount(hybrid); dir != "/sys/fs/cgroup/unified" || !rw {
		t.Errorf("hybrid: %q rw=%v", dir, rw)
	}
	const docker = `700 690 0:31 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw
`
	if dir, rw := cgroup2Mount(docker); dir != "/sys/fs/cgroup" || rw {
		t.Errorf("read-only: %q rw=%v", dir, rw)
	}
	if dir, _ := cgroup2Mount("22 1 0:20 / /proc rw - proc proc rw\n"); dir != "" {
		t.Errorf("no cgroup2: %q", dir)
	}
	if dir, _ := cgroup2Mount(`1 2 0:3 / /a\040b rw - cgroup2 none rw`); dir != "/a b" {
		t.Errorf("escaped: %q", dir)
	}
}

func TestCapEff(t *testing.T) {
	if v, ok := capEff("Name:\tx\nCapPrm:\t0\nCapEff:\t000001fffeffffff\n"); !ok || v != 0x1fffeffffff {
		t.Errorf("capEff = %x %v", v, ok)
	}
	if _, ok := capEff("Name:\tx\n"); ok {
		t.Error("capEff found a mask in a status without one")
	}
}

// TestThisMachine checks the preconditions here; CI runs as root on a
// machine that has them all, so under the switch nothing may be missing.
func TestThisMachine(t *testing.T) {
	missing := Check(Kernel...)
	for _, m := range missing {
		t.Logf("missing: %s", m)
	}
	if len(missing) > 0 && Required() {
		t.Errorf("%s", Message("needs", missing))
	}
}
