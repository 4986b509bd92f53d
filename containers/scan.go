// SPDX-License-Identifier: Apache-2.0

package containers

import (
	"os"
	"path"
	"path/filepath"
	"sort"
)

// Found is a container's cgroup found in a cgroup tree.
type Found struct {
	Ref
	// Path is the cgroup's path below the tree's top, "/"-rooted as in
	// /proc/PID/cgroup: "/sluice.slice/docker-<id>.scope".
	Path string
}

// Parent is the cgroup the engine placed the container in: Docker's
// --cgroup-parent, "/sluice.slice" for "/sluice.slice/docker-<id>.scope".
func (f Found) Parent() string { return path.Dir(f.Path) }

// Find lists the container cgroups in the cgroup tree mounted at top, down
// to depth levels below it (1: its children), sorted by path. It does not
// look inside a container's cgroup (whatever the container made there is
// its own), and unreadable directories are skipped: a tree changes while
// it is read.
func Find(top string, depth int) []Found {
	var out []Found
	var walk func(rel string, level int)
	walk = func(rel string, level int) {
		entries, err := os.ReadDir(filepath.Join(top, rel))
		if err != nil {
			return
		}
		for _, de := range entries {
			if !de.IsDir() {
				continue
			}
			p := path.Join("/", rel, de.Name())
			if ref, ok := ParseCgroup(de.Name()); ok {
				out = append(out, Found{Ref: ref, Path: p})
				continue
			}
			if level < depth {
				walk(p, level+1)
			}
		}
	}
	walk("/", 1)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
