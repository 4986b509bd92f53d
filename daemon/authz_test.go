// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// sessions is a daemon's sessions as the rules see them: two users, a
// chain of nested sessions for uid 1000 (agent -> tool -> helper) and a
// sibling it must not reach.
var sessionsOfRules = map[string]sessionRef{
	"agent":   {name: "agent", uid: 1000},
	"tool":    {name: "tool", parent: "agent", uid: 1000},
	"helper":  {name: "helper", parent: "tool", uid: 1000},
	"sibling": {name: "sibling", uid: 1000},
	"other":   {name: "other", uid: 2000},
	"nested2": {name: "nested2", parent: "other", uid: 2000},
}

func lookup(name string) (sessionRef, bool) {
	s, ok := sessionsOfRules[name]
	return s, ok
}

// visibleTo lists the sessions c sees, sorted.
func visibleTo(c caller) []string {
	var out []string
	for name, s := range sessionsOfRules {
		if c.sees(s, lookup) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func TestWhoSeesWhichSessions(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    caller
		want []string
	}{
		{"root sees all", caller{uid: 0}, []string{"agent", "helper", "nested2", "other", "sibling", "tool"}},
		{"a user sees its own", caller{uid: 1000}, []string{"agent", "helper", "sibling", "tool"}},
		{"the admin group does not widen what a user sees", caller{uid: 1000, admin: true}, []string{"agent", "helper", "sibling", "tool"}},
		{"another user", caller{uid: 2000}, []string{"nested2", "other"}},
		{"a stranger sees nothing", caller{uid: 3000}, nil},
		{"confined: own session and descendants", caller{uid: 1000, confined: true, session: "agent"}, []string{"agent", "helper", "tool"}},
		{"confined in a nested session: not its parent", caller{uid: 1000, confined: true, session: "tool"}, []string{"helper", "tool"}},
		{"confined in a leaf: only itself", caller{uid: 1000, confined: true, session: "helper"}, []string{"helper"}},
		{"confined outside this daemon's sessions: none", caller{uid: 1000, confined: true}, nil},
		{"confined root: own subtree only", caller{uid: 0, confined: true, session: "other"}, []string{"nested2", "other"}},
		{"confined in another user's session: uid still rules", caller{uid: 1000, confined: true, session: "other"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := visibleTo(tc.c); !slices.Equal(got, tc.want) {
				t.Errorf("%+v sees %q, want %q", tc.c, got, tc.want)
			}
		})
	}
}

// A cycle in edited session records must end the walk, not the daemon.
func TestSeesSurvivesAParentCycle(t *testing.T) {
	loop := map[string]sessionRef{"a": {name: "a", parent: "b", uid: 1}, "b": {name: "b", parent: "a", uid: 1}}
	c := caller{uid: 1, confined: true, session: "elsewhere"}
	if c.sees(loop["a"], func(n string) (sessionRef, bool) { s, ok := loop[n]; return s, ok }) {
		t.Error("a caller outside a cycle of sessions sees into it")
	}
}

func TestWhoSeesAllEvents(t *testing.T) {
	for _, tc := range []struct {
		c    caller
		want bool
	}{
		{caller{uid: 0}, true},
		{caller{uid: 1000, admin: true}, true},
		{caller{uid: 1000}, false},
		{caller{uid: 1000, creator: true}, false},
		{caller{uid: 0, confined: true, session: "agent"}, false},
		{caller{uid: 1000, admin: true, confined: true, session: "agent"}, false},
	} {
		if got := tc.c.seesAllEvents(); got != tc.want {
			t.Errorf("%+v seesAllEvents = %v, want %v", tc.c, got, tc.want)
		}
	}
}

func TestWhoMayChangeTheMachineAllowlist(t *testing.T) {
	for _, tc := range []struct {
		c    caller
		want string // "" allowed, else part of the refusal
	}{
		{caller{uid: 0}, ""},
		{caller{uid: 1000, admin: true}, ""},
		{caller{uid: 1000}, "needs root or the admin group"},
		{caller{uid: 1000, creator: true}, "needs root or the admin group"},
		{caller{uid: 0, confined: true, session: "agent"}, "inside a sluice session"},
		{caller{uid: 1000, admin: true, confined: true}, "inside a sluice session"},
	} {
		err := tc.c.mayChangeMachine()
		checkRefusal(t, "mayChangeMachine", tc.c, err, tc.want)
	}
}

// checkRefusal wants err nil for want "", else a 403 containing want.
func checkRefusal(t *testing.T, what string, c caller, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("%+v %s: %v, want allowed", c, what, err)
		}
		return
	}
	var he *httpError
	if !errors.As(err, &he) || he.code != http.StatusForbidden || !strings.Contains(he.msg, want) {
		t.Errorf("%+v %s = %v, want a 403 containing %q", c, what, err, want)
	}
}
