// SPDX-License-Identifier: Apache-2.0

package containers

import (
	"fmt"
	"path"
	"strings"
)

// PodCgroup turns a pod's cgroup parent as the kubelet gives it to the
// runtime (CRI's linux.cgroup_parent, NRI's PodSandbox.Linux.CgroupParent)
// into the pod cgroup's path below the cgroup2 mount. With the cgroupfs
// driver the parent is that path already ("/kubepods/besteffort/pod<uid>");
// with the systemd driver it is a slice unit ("kubepods-besteffort-
// pod<uid>.slice"), whose cgroup systemd nests by the dashes of its name:
// kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice.
func PodCgroup(parent string) (string, error) {
	if parent == "" {
		return "", fmt.Errorf("the pod has no cgroup parent")
	}
	if strings.HasPrefix(parent, "/") {
		rel := strings.Trim(path.Clean(parent), "/")
		if rel == "" || strings.Contains(parent, "/../") || strings.HasSuffix(parent, "/..") {
			return "", fmt.Errorf("cgroup parent %q: not a pod's cgroup", parent)
		}
		return rel, nil
	}
	unit, ok := strings.CutSuffix(parent, ".slice")
	if !ok || unit == "" || strings.ContainsAny(unit, "/\x00") || strings.HasPrefix(unit, "-") || strings.HasSuffix(unit, "-") || strings.Contains(unit, "--") {
		return "", fmt.Errorf("cgroup parent %q: neither a cgroupfs path nor a systemd slice", parent)
	}
	parts := strings.Split(unit, "-")
	dirs := make([]string, len(parts))
	for i := range parts {
		dirs[i] = strings.Join(parts[:i+1], "-") + ".slice"
	}
	return strings.Join(dirs, "/"), nil
}
