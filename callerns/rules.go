// SPDX-License-Identifier: Apache-2.0

package callerns

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Rules say which callers from other namespaces may have a session: each
// rule is "uid:N", "gid:N" (the caller's primary or a supplementary
// group) or "cgroup:GLOB" (a shell pattern, path.Match, over the caller's
// cgroup v2 path, e.g. "cgroup:/system.slice/docker-*.scope"). A caller
// matching any rule is permitted; no rules permit nobody.
type Rules struct {
	uids, gids []uint32
	cgroups    []string
}

// ParseRules parses rules as the configuration and the flag give them.
// A bad rule is an error naming it; nothing is half-parsed.
func ParseRules(specs []string) (Rules, error) {
	var r Rules
	for _, s := range specs {
		kind, val, ok := strings.Cut(strings.TrimSpace(s), ":")
		if !ok || val == "" {
			return Rules{}, fmt.Errorf("container caller rule %q: want uid:N, gid:N or cgroup:GLOB", s)
		}
		switch kind {
		case "uid", "gid":
			n, err := strconv.ParseUint(val, 10, 32)
			if err != nil {
				return Rules{}, fmt.Errorf("container caller rule %q: %s must be a number", s, kind)
			}
			if kind == "uid" {
				r.uids = append(r.uids, uint32(n))
			} else {
				r.gids = append(r.gids, uint32(n))
			}
		case "cgroup":
			if !strings.HasPrefix(val, "/") {
				return Rules{}, fmt.Errorf("container caller rule %q: the cgroup pattern must start with /", s)
			}
			if _, err := path.Match(val, "/"); err != nil {
				return Rules{}, fmt.Errorf("container caller rule %q: %v", s, err)
			}
			r.cgroups = append(r.cgroups, val)
		default:
			return Rules{}, fmt.Errorf("container caller rule %q: unknown kind %q (want uid, gid or cgroup)", s, kind)
		}
	}
	return r, nil
}

// Empty reports whether r permits nobody.
func (r Rules) Empty() bool { return len(r.uids)+len(r.gids)+len(r.cgroups) == 0 }

// Caller is what the rules look at.
type Caller struct {
	UID    uint32
	GIDs   []uint32 // primary and supplementary
	Cgroup string   // cgroup v2 path ("0::" line of /proc/PID/cgroup); "" if unknown
}

// Permits reports whether c matches one of r's rules.
func (r Rules) Permits(c Caller) bool {
	for _, u := range r.uids {
		if c.UID == u {
			return true
		}
	}
	for _, g := range r.gids {
		for _, have := range c.GIDs {
			if g == have {
				return true
			}
		}
	}
	if c.Cgroup != "" {
		for _, pat := range r.cgroups {
			if ok, _ := path.Match(pat, c.Cgroup); ok {
				return true
			}
		}
	}
	return false
}
