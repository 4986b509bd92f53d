// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// account is one passwd entry, as far as spawning needs it.
type account struct {
	name     string
	uid, gid uint32
}

// userDB is the account database LookupUser consults; tests supply a fake so
// the resolution rules are checked on every platform.
type userDB interface {
	// userByName fails when the name is unknown.
	userByName(name string) (account, error)
	// userByID reports found=false, without error, for an unknown uid.
	userByID(uid uint32) (a account, found bool, err error)
	// groupByName fails when the name is unknown.
	groupByName(name string) (uint32, error)
	// groupsOf lists the groups a known account belongs to.
	groupsOf(a account) ([]uint32, error)
}

// resolveUserSpec turns "USER[:GROUP]" into SpawnOptions.
//
// USER is a name or a numeric uid; a numeric uid need not exist in the
// account database (an unknown uid gets gid = uid and no supplementary
// groups). Without GROUP, the account's primary group and its supplementary
// groups are used, as login would. With GROUP (a name or a numeric gid), that
// group is the only one: no supplementary groups, as in runc, because an
// explicit group is a request for exactly that identity.
func resolveUserSpec(spec string, db userDB) (SpawnOptions, error) {
	userPart, groupPart, hasGroup, err := splitUserSpec(spec)
	if err != nil {
		return SpawnOptions{}, err
	}
	var (
		acct  account
		known bool
	)
	if uid, numeric, err := parseID(userPart); err != nil {
		return SpawnOptions{}, fmt.Errorf("cgroups: user %q: %w", userPart, err)
	} else if numeric {
		acct, known, err = db.userByID(uid)
		if err != nil {
			return SpawnOptions{}, fmt.Errorf("cgroups: look up uid %d: %w", uid, err)
		}
		if !known {
			acct = account{uid: uid, gid: uid}
		}
	} else {
		acct, err = db.userByName(userPart)
		if err != nil {
			return SpawnOptions{}, fmt.Errorf("cgroups: look up user %q: %w", userPart, err)
		}
		known = true
	}

	opts := SpawnOptions{UID: acct.uid, GID: acct.gid}
	switch {
	case hasGroup:
		gid, numeric, err := parseID(groupPart)
		if err != nil {
			return SpawnOptions{}, fmt.Errorf("cgroups: group %q: %w", groupPart, err)
		}
		if !numeric {
			if gid, err = db.groupByName(groupPart); err != nil {
				return SpawnOptions{}, fmt.Errorf("cgroups: look up group %q: %w", groupPart, err)
			}
		}
		opts.GID = gid
	case known:
		groups, err := db.groupsOf(acct)
		if err != nil {
			return SpawnOptions{}, fmt.Errorf("cgroups: supplementary groups of %q: %w", acct.name, err)
		}
		slices.Sort(groups)
		opts.Groups = slices.Compact(groups)
	}
	return opts, nil
}

// splitUserSpec splits "USER[:GROUP]"; neither part may be empty.
func splitUserSpec(spec string) (user, group string, hasGroup bool, err error) {
	user, group, hasGroup = strings.Cut(spec, ":")
	switch {
	case user == "":
		return "", "", false, fmt.Errorf("cgroups: user spec %q: want USER or USER:GROUP (names or numeric ids)", spec)
	case hasGroup && group == "":
		return "", "", false, fmt.Errorf("cgroups: user spec %q: empty group after ':'", spec)
	case strings.Contains(group, ":"):
		return "", "", false, fmt.Errorf("cgroups: user spec %q: more than one ':'", spec)
	case strings.ContainsAny(spec, " \t\n"):
		return "", "", false, fmt.Errorf("cgroups: user spec %q contains white space", spec)
	}
	return user, group, hasGroup, nil
}

// parseID reads an all-digit string as a numeric id. Anything else is a name
// (numeric=false), so "1000" is always uid 1000 even if an account is oddly
// named "1000".
func parseID(s string) (id uint32, numeric bool, err error) {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false, nil
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, true, fmt.Errorf("not a valid id: %w", err)
	}
	if n == invalidID {
		return 0, true, fmt.Errorf("id %d is reserved (it means -1)", n)
	}
	return uint32(n), true, nil
}
