// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Command runcnolimits runs runc with a container's resource limits taken
// out of its spec (all of linux.resources but devices, which cgroup v2
// enforces with an eBPF program, not a controller). It is the OCI runtime
// of inside-kubernetes.sh's containerd where the booted system's cgroup v2
// tree has no controllers: a systemd-nspawn container of a host with
// hybrid cgroups, whose controllers are all bound to v1. There runc would
// fail every pod at its cpu.weight (containerd gives each sandbox CPU
// shares); on a real cgroup v2 node the script runs runc itself.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// runc is the real runtime.
const runc = "/usr/local/bin/runc"

func main() {
	args := os.Args[1:]
	for i, a := range args {
		bundle := ""
		switch {
		case (a == "--bundle" || a == "-b") && i+1 < len(args):
			bundle = args[i+1]
		case strings.HasPrefix(a, "--bundle="):
			bundle = strings.TrimPrefix(a, "--bundle=")
		}
		if bundle != "" {
			if err := strip(filepath.Join(bundle, "config.json")); err != nil {
				fmt.Fprintf(os.Stderr, "runcnolimits: %v\n", err)
				os.Exit(1)
			}
		}
	}
	err := unix.Exec(runc, append([]string{runc}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "runcnolimits: exec %s: %v\n", runc, err)
	os.Exit(1)
}

// strip rewrites the spec at path with linux.resources holding only its
// devices.
func strip(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var linux map[string]json.RawMessage
	if raw, ok := spec["linux"]; !ok || json.Unmarshal(raw, &linux) != nil {
		return nil
	}
	var res map[string]json.RawMessage
	if raw, ok := linux["resources"]; !ok || json.Unmarshal(raw, &res) != nil {
		return nil
	}
	kept := map[string]json.RawMessage{}
	if d, ok := res["devices"]; ok {
		kept["devices"] = d
	}
	if linux["resources"], err = json.Marshal(kept); err != nil {
		return err
	}
	if spec["linux"], err = json.Marshal(linux); err != nil {
		return err
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
