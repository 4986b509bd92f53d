package enforcer

import (
	"fmt"
	"os"
	"regexp"
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
