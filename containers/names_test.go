// SPDX-License-Identifier: Apache-2.0

package containers

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const id = "81d28f751ab5a758fe270b871b012701530f2b91ec5393e27b11b7e6f65b96de"

// Every engine's naming is recognised, and nothing else is: sluice's own
// sessions, slices, conmon's scope, ids of the wrong length or case.
func TestParseCgroup(t *testing.T) {
	for name, want := range map[string]Ref{
		id:                                {ID: id, Engine: "cgroupfs"},
		"docker-" + id + ".scope":         {ID: id, Engine: "docker"},
		"cri-containerd-" + id + ".scope": {ID: id, Engine: "containerd"},
		"crio-" + id + ".scope":           {ID: id, Engine: "crio"},
		"libpod-" + id + ".scope":         {ID: id, Engine: "podman"},
		"libpod-conmon-" + id + ".scope":  {},
		"run-1160-b288aae2232c":           {},
		"sluice-run-1160-b288.scope":      {},
		"sluice.slice":                    {},
		id[:63]:                           {},
		id + "0":                          {},
		"81D28F751AB5" + id[12:]:          {},
		"docker-" + id:                    {},
		"docker-" + id + ".slice":         {},
		"docker-" + id[:63] + ".scope":    {},
		"podman-" + id + ".scope":         {},
		"":                                {},
	} {
		got, ok := ParseCgroup(name)
		if ok != (want != Ref{}) || got != want {
			t.Errorf("ParseCgroup(%q) = %+v, %v; want %+v", name, got, ok, want)
		}
	}
	ref, parent, ok := ParseCgroupPath("/sluice.slice/docker-" + id + ".scope")
	if !ok || ref.Engine != "docker" || parent != "/sluice.slice" {
		t.Errorf("ParseCgroupPath: %+v %q %v", ref, parent, ok)
	}
}

// Find, against cgroup trees as each engine and driver leaves them, finds
// the containers' cgroups and their parents, and not what is no container.
func TestFindInEngineTrees(t *testing.T) {
	other := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	top := t.TempDir()
	dirs := []string{
		// Docker, systemd driver, --cgroup-parent=sluice.slice.
		"sluice.slice/docker-" + id + ".scope",
		// sluice's own sessions in its slice.
		"sluice.slice/sluice-run-42-abcd.scope",
		// containerd (CRI) and podman with the systemd driver.
		"kubepods.slice/kubepods-besteffort.slice/cri-containerd-" + other + ".scope",
		"machine.slice/libpod-" + other + ".scope",
		"machine.slice/libpod-conmon-" + other + ".scope",
		// Docker's cgroupfs driver, --cgroup-parent=/sluice, and its default.
		"sluice/" + other,
		"docker/" + id,
		// What a container makes inside its own cgroup is not looked at.
		"docker/" + id + "/" + other,
		// A typo'd parent.
		"sluce.slice/docker-" + other + ".scope",
		"system.slice/containerd.service",
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(top, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, f := range Find(top, 2) {
		got = append(got, f.Engine+" "+f.Parent()+" "+f.ID[:4])
	}
	want := []string{
		"cgroupfs /docker 81d2",
		"podman /machine.slice 0123",
		"docker /sluce.slice 0123",
		"docker /sluice.slice 81d2",
		"cgroupfs /sluice 0123",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Find depth 2:\n got %q\nwant %q", got, want)
	}
	// Three levels reach the CRI pod's container.
	if n := len(Find(top, 3)); n != 6 {
		t.Errorf("Find depth 3: %d containers, want 6", n)
	}
	// The daemon's own view: the children of its root.
	var inRoot []string
	for _, f := range Find(filepath.Join(top, "sluice.slice"), 1) {
		inRoot = append(inRoot, f.Path)
	}
	if want := []string{"/docker-" + id + ".scope"}; !reflect.DeepEqual(inRoot, want) {
		t.Errorf("Find in the root: %q, want %q", inRoot, want)
	}
}
