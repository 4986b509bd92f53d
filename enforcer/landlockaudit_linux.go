package enforcer

import (
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/kaudit"
)

// SessionOfPID names the session whose cgroup pid is in (or lies below),
// "" when pid is in none of this enforcer's sessions or is gone. It is how
// a Landlock refusal (package kaudit), which names processes, not
// cgroups, finds its session.
func (e *Enforcer) SessionOfPID(pid uint32) string {
	rel := kaudit.CgroupOf(pid)
	if rel == "" {
		return ""
	}
	mount, err := cgroups.Mount()
	if err != nil {
		return ""
	}
	r, err := filepath.Rel(e.root.Path(), filepath.Join(mount, rel))
	if err != nil || r == "." || r == ".." || strings.HasPrefix(r, "../") {
		return ""
	}
	name, _, _ := strings.Cut(r, "/")
	return name
}
