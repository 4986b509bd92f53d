// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/containers"
)

// Never silently unconfined: containers placed where the datapath is not.
//
// A container is confined only when its cgroup is a child of sluice's root.
// Two mistakes put it elsewhere, and each is refused and reported, never
// left to run unconfined without a word:
//   - the other form of the name (--cgroup-parent=/sluice on a host whose
//     root is sluice.slice, or sluice.slice where the root is /sluice): the
//     daemon fences that name (cgroups.Root.Fence): a cgroup the engine
//     makes there is frozen before the container's first instruction (on
//     a pure cgroup v2 host the engine cannot make it at all), and the
//     daemon kills what arrives there, so `docker run` fails with an error;
//   - any other parent (a typo, or none at all) for a container that
//     carries a sluice.policy label: the label says it was meant to be
//     confined, so the daemon freezes it (cgroup.freeze) and reports it,
//     naming the flag that works here. A container without the label in a
//     parent whose name is a near miss of sluice's ("sluce.slice") is
//     reported, not frozen: sluice cannot know it was meant for it.
//
// The refusal of a misplaced labelled container is not from its first
// instruction: the daemon finds it within about a second. The fence's is.
// Frozen containers stay frozen until removed (docker rm -f); the log line
// says how to start them so that they are confined.

// placementDepth is how deep below the cgroup2 mount misplaced containers
// are looked for: /docker/<id>, /system.slice/docker-<id>.scope,
// /kubepods.slice/kubepods-besteffort.slice/cri-containerd-<id>.scope.
const placementDepth = 3

// fenceOtherForm closes the other form of the root's name.
func (s *Server) fenceOtherForm() {
	root := s.e.Root()
	if err := root.Fence(); err != nil {
		s.logf("warning: %v; a container given --cgroup-parent for %s would run unconfined", err, root.FenceName())
		s.containerRefused("", "fence", fmt.Sprintf("could not fence %s: %v: a container placed there would run unconfined", root.FencePath(), err))
		return
	}
	s.logf("containers: use %s; the other form, %s, is fenced (frozen, and closed where the host has no cgroup v1): a container placed there fails to start instead of running unconfined",
		ContainerParentHint(root), root.FencePath())
}

// ContainerParentHint is the --cgroup-parent that confines a container
// under root: the slice name where systemd manages the root (Docker's
// systemd driver), the cgroup path otherwise (cgroupfs driver).
func ContainerParentHint(root *cgroups.Root) string {
	if root.Slice() != "" {
		return "--cgroup-parent=" + root.Slice()
	}
	return "--cgroup-parent=/" + root.Name()
}

// checkPlacement looks for containers outside the root that were meant for
// it, and refuses them.
func (s *Server) checkPlacement() {
	root := s.e.Root()
	mount := filepath.Dir(root.Path())
	rootRel := "/" + root.Name()
	fenceRel := "/" + root.FenceName()
	seen := map[string]bool{}
	for _, f := range containers.Find(mount, placementDepth) {
		parent := f.Parent()
		if parent == rootRel || strings.HasPrefix(f.Path, rootRel+"/") {
			continue // confined: a session, or a cgroup below one
		}
		seen[f.Path] = true
		ino := inodeOf(filepath.Join(mount, f.Path))
		s.ctr.mu.Lock()
		done := s.ctr.judged[f.Path] == ino
		s.ctr.judged[f.Path] = ino
		s.ctr.mu.Unlock()
		if parent == fenceRel {
			// Killed at every scan while it is there: its engine may move
			// a process in after a kill.
			s.refuseFenced(mount, f, !done)
			continue
		}
		if done {
			continue
		}
		s.judgePlacement(mount, f)
	}
	s.ctr.mu.Lock()
	for p := range s.ctr.judged {
		if !seen[p] {
			delete(s.ctr.judged, p)
		}
	}
	s.ctr.mu.Unlock()
}

// refuseFenced kills a container in the fence (frozen there since its
// first process arrived, or placed before the daemon made the fence), so
// that its engine's start fails; report says to tell it.
func (s *Server) refuseFenced(mount string, f containers.Found, report bool) {
	dir := filepath.Join(mount, f.Path)
	err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	if !report {
		return
	}
	short := f.ID[:12]
	msg := fmt.Sprintf("container %s refused: its cgroup %s is in %s, the other form of sluice's root %s, where nothing is confined; "+
		"it was frozen there and is killed (its docker run fails). Start it with %s", short, f.Path, f.Parent(), s.e.Root().Path(), ContainerParentHint(s.e.Root()))
	if err != nil {
		msg = fmt.Sprintf("container %s in the fenced cgroup %s (stays frozen): killing it failed: %v; remove it and start it with %s", short, f.Path, err, ContainerParentHint(s.e.Root()))
	}
	s.reportMisplaced(f, msg)
}

// judgePlacement decides about one container outside the root and the
// fence.
func (s *Server) judgePlacement(mount string, f containers.Found) {
	hint := ContainerParentHint(s.e.Root())
	short := f.ID[:12]
	dir := filepath.Join(mount, f.Path)
	var why string
	switch {
	case underDatapath(dir):
		// Another sluice instance's root (or another enforcer's): its
		// connect programs judge the container; not this daemon's to
		// refuse.
		return
	default:
		pid := firstPid(dir)
		if pid == 0 || inSetup(dir) {
			// Not started yet, still being set up by its runtime (freezing
			// runc mid-way would hang the engine), or gone: look again at
			// the next scan.
			s.ctr.mu.Lock()
			delete(s.ctr.judged, f.Path)
			s.ctr.mu.Unlock()
			return
		}
		rec, err := containers.RecordOf(pid, f.ID)
		if err != nil {
			if near := nearMiss(path.Base(f.Parent()), s.e.Root()); near {
				s.reportMisplaced(f, fmt.Sprintf("container %s is in %s, whose name is close to sluice's root but is not it: it is NOT confined (its record: %v); if it was meant to be, start it with %s", short, f.Parent(), err, hint))
			}
			return
		}
		label, ok := rec.Policy()
		if !ok {
			if nearMiss(path.Base(f.Parent()), s.e.Root()) {
				s.reportMisplaced(f, fmt.Sprintf("container %s is in %s, whose name is close to sluice's root but is not it: it is NOT confined; if it was meant to be, start it with %s (a %s label makes such a mistake a refusal)", short, f.Parent(), hint, containers.PolicyLabel))
			}
			return
		}
		why = fmt.Sprintf("it has the label %s=%s, but its cgroup %s is not under sluice's root %s", containers.PolicyLabel, label, f.Path, s.e.Root().Path())
	}
	msg := fmt.Sprintf("container %s refused: %s; frozen, since it is not confined. Remove it (docker rm -f %s) and start it with %s", short, why, short, hint)
	if err := freeze(dir); err != nil {
		msg = fmt.Sprintf("container %s is NOT confined: %s; freezing it failed (%v). Stop it (docker rm -f %s) and start it with %s", short, why, err, short, hint)
	}
	s.reportMisplaced(f, msg)
}

// reportMisplaced writes the daemon log line and the audit line.
func (s *Server) reportMisplaced(f containers.Found, msg string) {
	s.logf("%s", msg)
	s.containerRefused(filepath.Base(f.Path), "container outside sluice's root", msg)
}

// freeze stops every process of the cgroup at dir (cgroup v2 freezer).
func freeze(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("1"), 0); err != nil {
		return fmt.Errorf("freeze %s: %w", dir, err)
	}
	return nil
}

// underDatapath reports whether cgroup connect4 programs are in force for
// the cgroup at dir (attached to it or an ancestor).
func underDatapath(dir string) bool {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	const queryEffective = 1 // BPF_F_QUERY_EFFECTIVE
	r, err := link.QueryPrograms(link.QueryOptions{Target: fd, Attach: ebpf.AttachCGroupInet4Connect, QueryFlags: queryEffective})
	return err == nil && len(r.Programs) > 0
}

// inSetup reports whether runc's setup stages are still in the cgroup at
// dir: the container has not been started yet.
func inSetup(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return false
	}
	for _, f := range strings.Fields(string(b)) {
		comm, _ := os.ReadFile("/proc/" + f + "/comm")
		if strings.HasPrefix(string(comm), "runc:[") {
			return true
		}
	}
	return false
}

func firstPid(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}

func inodeOf(p string) uint64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// nearMiss reports whether a parent's name looks like a mistyped form of
// the root's names (within two edits of either, not equal to one).
func nearMiss(name string, root *cgroups.Root) bool {
	return nearMissOf(name, root.Name(), root.FenceName())
}

func nearMissOf(name string, wants ...string) bool {
	for _, want := range wants {
		if name != want && editDistance(name, want) <= 2 {
			return true
		}
	}
	return false
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
