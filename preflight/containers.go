// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"encoding/json"
	"strings"
)

// dockerDriver is Docker's cgroup driver as its configuration
// (/etc/docker/daemon.json, exec-opts native.cgroupdriver=...) says, else
// Docker's own default: systemd on a pure cgroup v2 host whose PID 1 is
// systemd, cgroupfs everywhere else. It also says where the answer came
// from.
func dockerDriver(daemonJSON []byte, systemdInit, pureV2 bool) (driver, source string) {
	var cfg struct {
		ExecOpts []string `json:"exec-opts"`
	}
	if len(daemonJSON) > 0 && json.Unmarshal(daemonJSON, &cfg) == nil {
		for _, o := range cfg.ExecOpts {
			if v, ok := strings.CutPrefix(strings.ReplaceAll(o, " ", ""), "native.cgroupdriver="); ok && (v == "systemd" || v == "cgroupfs") {
				return v, "/etc/docker/daemon.json"
			}
		}
	}
	if systemdInit && pureV2 {
		return "systemd", "Docker's default on a pure cgroup v2 host with systemd"
	}
	return "cgroupfs", "Docker's default here"
}

// containerFlag is the `docker run` flag that confines a whole container
// on this host, given sluice's root (a slice when systemd manages it, else
// the cgroup /<root>) and Docker's driver, or why none does.
func containerFlag(rootSlice, rootName, driver string) (flag string, st Status, fix string) {
	switch {
	case rootSlice != "" && driver == "systemd":
		return "--cgroup-parent=" + rootSlice, Pass, ""
	case rootSlice != "":
		// The cgroupfs driver takes a path: the container's cgroup is made
		// directly in the slice's, outside systemd's units but under the
		// datapath.
		return "--cgroup-parent=/" + rootSlice, Warn,
			"Docker's cgroupfs driver on a systemd host makes cgroups systemd does not know; prefer \"exec-opts\": [\"native.cgroupdriver=systemd\"] in /etc/docker/daemon.json, then --cgroup-parent=" + rootSlice
	case driver == "systemd":
		return "", Fail,
			"Docker's systemd driver takes only a slice, but sluice's sessions live in the cgroup /" + rootName +
				": unset SLUICE_CGROUP_MANAGER (sessions then live in " + strings.ReplaceAll(rootName, "-", "_") + ".slice), or run Docker with native.cgroupdriver=cgroupfs"
	}
	return "--cgroup-parent=/" + rootName, Pass, ""
}
