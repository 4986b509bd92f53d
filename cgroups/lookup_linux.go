// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
)

// LookupUser resolves "USER[:GROUP]" to SpawnOptions, with names looked up in
// the system's account database (os/user) and numeric ids taken as they are:
// a numeric uid need not have an account. Rules:
//
//   - "alice": alice's uid, primary gid and supplementary groups.
//   - "1234" with no account: uid 1234, gid 1234, no supplementary groups.
//   - "alice:staff" or "1234:5678": that uid and that gid, and no
//     supplementary groups, since an explicit group asks for exactly it.
//
// It does not refuse root; Session.Start does (ErrRootUID).
func LookupUser(spec string) (SpawnOptions, error) {
	return resolveUserSpec(spec, osUserDB{})
}

// osUserDB reads accounts through os/user (NSS with cgo, /etc/passwd and
// /etc/group without).
type osUserDB struct{}

func (osUserDB) userByName(name string) (account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return account{}, err
	}
	return accountOf(u)
}

func (osUserDB) userByID(uid uint32) (account, bool, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	var unknown user.UnknownUserIdError
	if errors.As(err, &unknown) {
		return account{}, false, nil
	}
	if err != nil {
		return account{}, false, err
	}
	a, err := accountOf(u)
	return a, err == nil, err
}

func (osUserDB) groupByName(name string) (uint32, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	return parseNumericID("gid", g.Gid)
}

func (osUserDB) groupsOf(a account) ([]uint32, error) {
	u := &user.User{Username: a.name, Uid: strconv.FormatUint(uint64(a.uid), 10), Gid: strconv.FormatUint(uint64(a.gid), 10)}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, err
	}
	out := make([]uint32, 0, len(ids))
	for _, id := range ids {
		g, err := parseNumericID("gid", id)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func accountOf(u *user.User) (account, error) {
	uid, err := parseNumericID("uid", u.Uid)
	if err != nil {
		return account{}, err
	}
	gid, err := parseNumericID("gid", u.Gid)
	if err != nil {
		return account{}, err
	}
	return account{name: u.Username, uid: uid, gid: gid}, nil
}

func parseNumericID(kind, s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s %q from the account database: %w", kind, s, err)
	}
	return uint32(n), nil
}
