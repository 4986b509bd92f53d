// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/containers"
	"github.com/sluice-dev/sluice/enforcer"
)

// containerChecks say which `docker run` flag confines a whole container
// on this host, and name the containers that are where sluice cannot see
// them (the daemon refuses them; containerplace_linux.go in package
// daemon).
func containerChecks(mount string) []Result {
	cfg, err := enforcer.ConfigFromEnv()
	if err != nil {
		return nil
	}
	instance := cfg.WithDefaults().CgroupName
	rootSlice, rootName, fence := "", instance, cgroups.SliceName(instance)
	if enforcer.SystemdScopes() {
		rootSlice = cgroups.SliceName(instance)
		rootName, fence = rootSlice, instance
	}
	daemonJSON, _ := os.ReadFile("/etc/docker/daemon.json")
	driver, source := dockerDriver(daemonJSON, cgroups.SystemdIsInit(), len(cgroups.V1Hierarchies()) == 0)
	flag, st, fix := containerFlag(rootSlice, rootName, driver)
	detail := fmt.Sprintf("Docker's cgroup driver: %s (%s); ", driver, source)
	if flag != "" {
		detail += "confine a whole container with: docker run " + flag + " [--label sluice.policy=NAME] ... " +
			"(devcontainer.json runArgs; GitLab's [runners.docker] cgroup_parent = \"" + strings.TrimPrefix(flag, "--cgroup-parent=") + "\")"
	} else {
		detail += "no --cgroup-parent confines a container here"
	}
	detail += fmt.Sprintf("; the other form (%s) is fenced by the daemon: a container given it fails to start", filepath.Join(mount, fence))
	rs := []Result{{Name: "containers", Status: st, Detail: detail, Fix: fix}}

	if os.Geteuid() != 0 {
		return rs
	}
	var bad []string
	for _, f := range containers.Find(mount, 3) {
		parent := f.Parent()
		if parent == "/"+rootName || strings.HasPrefix(f.Path, "/"+rootName+"/") {
			continue
		}
		frozen := ""
		if b, err := os.ReadFile(filepath.Join(mount, f.Path, "cgroup.freeze")); err == nil && strings.TrimSpace(string(b)) == "1" {
			frozen = ", frozen by the daemon"
		}
		if parent == "/"+fence {
			bad = append(bad, fmt.Sprintf("%s in %s (the fenced form)%s", f.ID[:12], parent, frozen))
			continue
		}
		pid := firstProc(filepath.Join(mount, f.Path))
		if pid == 0 {
			continue
		}
		if rec, err := containers.RecordOf(pid, f.ID); err == nil {
			if label, ok := rec.Policy(); ok {
				bad = append(bad, fmt.Sprintf("%s (%s=%s) in %s%s", f.ID[:12], containers.PolicyLabel, label, path.Clean(parent), frozen))
			}
		}
	}
	if len(bad) > 0 {
		rs = append(rs, Result{Name: "misplaced containers", Status: Warn,
			Detail: "not under sluice's root, so not confined (the daemon freezes them): " + strings.Join(bad, "; "),
			Fix:    "docker rm -f them and start them with " + flag})
	}
	return rs
}

func firstProc(dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			return pid
		}
	}
	return 0
}
