// SPDX-License-Identifier: Apache-2.0

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

// DatapathExplains reports whether the datapath already explains the
// Landlock refusal d, so that its own line would say it twice: a refusal
// by the abstract-socket scope alone where the datapath judges unix
// sockets, since the datapath told the session's owner about the name
// (loader.Event.Scoped, Session.ResolveScoped).
func (e *Enforcer) DatapathExplains(d kaudit.Denial) bool {
	if e.dp.UnixJudging() != nil || len(d.Blockers) == 0 {
		return false
	}
	for _, b := range d.Blockers {
		if b != "scope.abstract_unix_socket" {
			return false
		}
	}
	return true
}
