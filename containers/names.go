// SPDX-License-Identifier: Apache-2.0

package containers

import (
	"path"
	"strings"
)

// Ref names a container cgroup: the container's id and the engine naming
// that made it.
type Ref struct {
	ID string
	// Engine is the naming the cgroup's name follows: "cgroupfs" (a bare
	// id, Docker's and containerd's cgroupfs driver), "docker",
	// "containerd", "crio" or "podman" (systemd driver scopes).
	Engine string
}

// scopePrefixes are the systemd scope names engines give containers,
// <prefix><id>.scope. podman's conmon gets libpod-conmon-<id>.scope, which
// holds no container process: its "conmon-" is no hex id, so it is not
// taken.
var scopePrefixes = []struct{ prefix, engine string }{
	{"docker-", "docker"},
	{"cri-containerd-", "containerd"},
	{"crio-", "crio"},
	{"libpod-", "podman"},
}

// ParseCgroup recognises the directory name of a container's cgroup and
// returns its id; anything else (a sluice session's name, a slice, a
// conmon scope, an id of the wrong length or case) is not a container.
func ParseCgroup(name string) (Ref, bool) {
	if IsID(name) {
		return Ref{ID: name, Engine: "cgroupfs"}, true
	}
	base, ok := strings.CutSuffix(name, ".scope")
	if !ok {
		return Ref{}, false
	}
	for _, p := range scopePrefixes {
		if id, ok := strings.CutPrefix(base, p.prefix); ok && IsID(id) {
			return Ref{ID: id, Engine: p.engine}, true
		}
	}
	return Ref{}, false
}

// IsID reports whether s is a container id as engines write them: 64
// lower-case hex digits.
func IsID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ParseCgroupPath is ParseCgroup of a cgroup path's last element, with the
// parent it was placed in: "/sluice.slice/docker-<id>.scope" is a docker
// container whose parent is "/sluice.slice".
func ParseCgroupPath(p string) (ref Ref, parent string, ok bool) {
	p = path.Clean("/" + p)
	ref, ok = ParseCgroup(path.Base(p))
	return ref, path.Dir(p), ok
}
