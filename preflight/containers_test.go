// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"strings"
	"testing"
)

// Docker's driver: its configuration first, else its default for the host.
func TestDockerDriver(t *testing.T) {
	for _, tc := range []struct {
		json          string
		systemd, pure bool
		want          string
	}{
		{"", true, true, "systemd"},
		{"", true, false, "cgroupfs"},
		{"", false, true, "cgroupfs"},
		{`{"exec-opts": ["native.cgroupdriver=cgroupfs"]}`, true, true, "cgroupfs"},
		{`{"exec-opts": ["native.cgroupdriver=systemd"]}`, false, false, "systemd"},
		{`{"exec-opts": ["native.cgroupdriver=bogus"]}`, true, true, "systemd"},
		{`not json`, false, false, "cgroupfs"},
	} {
		if got, _ := dockerDriver([]byte(tc.json), tc.systemd, tc.pure); got != tc.want {
			t.Errorf("dockerDriver(%q, %v, %v) = %s, want %s", tc.json, tc.systemd, tc.pure, got, tc.want)
		}
	}
}

// The flag for each root and driver, and no flag where none can work.
func TestContainerFlag(t *testing.T) {
	for _, tc := range []struct {
		slice, name, driver string
		flag                string
		st                  Status
	}{
		{"sluice.slice", "sluice.slice", "systemd", "--cgroup-parent=sluice.slice", Pass},
		{"sluice.slice", "sluice.slice", "cgroupfs", "--cgroup-parent=/sluice.slice", Warn},
		{"", "sluice", "cgroupfs", "--cgroup-parent=/sluice", Pass},
		{"", "sluice-dev", "cgroupfs", "--cgroup-parent=/sluice-dev", Pass},
		{"", "sluice", "systemd", "", Fail},
	} {
		flag, st, fix := containerFlag(tc.slice, tc.name, tc.driver)
		if flag != tc.flag || st != tc.st || (st != Pass) != (fix != "") {
			t.Errorf("containerFlag(%q, %q, %q) = %q %v %q; want %q %v", tc.slice, tc.name, tc.driver, flag, st, fix, tc.flag, tc.st)
		}
	}
	if _, _, fix := containerFlag("", "sluice", "systemd"); !strings.Contains(fix, "SLUICE_CGROUP_MANAGER") {
		t.Errorf("the fix does not name the setting: %q", fix)
	}
}
