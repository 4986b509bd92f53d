// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"fmt"
	"os"
	"regexp"

	"github.com/sluice-dev/sluice/cgroups"
)

// InstanceEnv names the environment variable that selects an isolated
// sluice instance: its own cgroup (<mount>/NAME), pins (/sys/fs/bpf/NAME)
// and state (/run/NAME). Tests use it so they never touch a real
// installation; the default instance is "sluice".
const InstanceEnv = "SLUICE_INSTANCE"

var instanceName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// ConfigFromEnv returns the configuration of the instance named by
// SLUICE_INSTANCE, or of the default instance.
func ConfigFromEnv() (Config, error) {
	name := os.Getenv(InstanceEnv)
	if name == "" {
		return Config{}, nil
	}
	if !instanceName.MatchString(name) {
		return Config{}, fmt.Errorf("%s=%q: want lower-case letters, digits and '-', starting with a letter", InstanceEnv, name)
	}
	return Config{CgroupName: name, PinDir: "/sys/fs/bpf/" + name, StateDir: "/run/" + name}, nil
}

// CgroupManagerEnv names the environment variable that chooses who manages
// session cgroups: "systemd" (transient scopes in a slice, over D-Bus) or
// "cgroupfs" (sluice's own subtree at the top of the cgroup2 mount). Unset
// or empty: systemd when PID 1 is systemd, else cgroupfs.
const CgroupManagerEnv = "SLUICE_CGROUP_MANAGER"

// SystemdScopes reports whether sessions are transient systemd scopes
// (cgroups.OpenSystemdRoot) rather than sluice's own cgroups.
func SystemdScopes() bool {
	switch os.Getenv(CgroupManagerEnv) {
	case "systemd":
		return true
	case "cgroupfs":
		return false
	}
	return cgroups.SystemdIsInit()
}

// openRoot opens the instance's cgroup root the way SystemdScopes says,
// creating it when create is set.
func openRoot(instance string, create bool) (*cgroups.Root, error) {
	if v := os.Getenv(CgroupManagerEnv); v != "" && v != "systemd" && v != "cgroupfs" {
		return nil, fmt.Errorf("%s=%q: want systemd or cgroupfs", CgroupManagerEnv, v)
	}
	if SystemdScopes() {
		return cgroups.OpenSystemdRoot(instance, create)
	}
	return cgroups.OpenRoot(instance)
}
