// SPDX-License-Identifier: Apache-2.0

package callerns

import "testing"

func TestParseRules(t *testing.T) {
	for _, bad := range []string{"", "uid", "uid:", "uid:x", "uid:-1", "pid:3", "cgroup:docker", "cgroup:/[", "gid:99999999999"} {
		if _, err := ParseRules([]string{"uid:1", bad}); err == nil {
			t.Errorf("ParseRules(%q) accepted", bad)
		}
	}
	r, err := ParseRules([]string{"uid:1000", " gid:27 ", "cgroup:/system.slice/docker-*.scope"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		c    Caller
		want bool
	}{
		{Caller{UID: 1000}, true},
		{Caller{UID: 1001}, false},
		{Caller{UID: 1001, GIDs: []uint32{5, 27}}, true},
		{Caller{UID: 0, GIDs: []uint32{0}}, false},
		{Caller{UID: 1001, Cgroup: "/system.slice/docker-abc.scope"}, true},
		{Caller{UID: 1001, Cgroup: "/system.slice/docker-abc.scope/inner"}, false},
		{Caller{UID: 1001, Cgroup: "/user.slice"}, false},
	}
	for _, c := range cases {
		if got := r.Permits(c.c); got != c.want {
			t.Errorf("Permits(%+v) = %v, want %v", c.c, got, c.want)
		}
	}
	var none Rules
	if !none.Empty() || none.Permits(Caller{UID: 0, GIDs: []uint32{0}, Cgroup: "/"}) {
		t.Error("no rules must permit nobody")
	}
}
