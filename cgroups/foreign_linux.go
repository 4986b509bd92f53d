// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
)

// Foreign returns the cgroup at rel below the cgroup2 mount, one that
// someone else made and owns outside sluice's root (a Kubernetes pod's,
// made by the kubelet), as a Session value: its id, path, processes and
// events, so that a session can be attached at it where it is. sluice
// moves nothing into it and never removes it: a session over it is
// released, not closed (enforcer.AttachPod).
func Foreign(rel string) (*Session, error) {
	mount, err := Mount()
	if err != nil {
		return nil, err
	}
	rel = strings.Trim(path.Clean("/"+rel), "/")
	if rel == "" || rel == "." {
		return nil, fmt.Errorf("cgroups: foreign cgroup: the root of the hierarchy is no one's session")
	}
	parent, name := path.Split(rel)
	r := &Root{mount: mount, name: strings.TrimSuffix(parent, "/")}
	return r.session(name)
}

// WalkIDs calls fn with the id of every cgroup of the cgroup2 hierarchy:
// what tells a pinned attachment whose cgroup is gone from a live one.
func WalkIDs(fn func(id uint64)) error {
	mount, err := Mount()
	if err != nil {
		return err
	}
	return filepath.WalkDir(mount, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == mount {
				return fmt.Errorf("cgroups: walk %s: %w", mount, err)
			}
			return nil // removed while walking
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(mount, p)
		if rel == "." {
			rel = ""
		}
		if id, err := cgroupIDOf(mount, rel); err == nil {
			fn(id)
		}
		return nil
	})
}

// IDOf returns the id of the cgroup at the absolute path p, below the
// cgroup2 mount.
func IDOf(p string) (uint64, error) {
	mount, err := Mount()
	if err != nil {
		return 0, err
	}
	rel, err := filepath.Rel(mount, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return 0, fmt.Errorf("cgroups: %s is not below the cgroup2 mount %s", p, mount)
	}
	return cgroupIDOf(mount, rel)
}
