// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
)

// sessions is a daemon's sessions as the rules see them: two users, a
// chain of nested sessions for uid 1000 (agent -> tool -> helper) and a
// sibling it must not reach.
var sessions = map[string]sessionRef{
	"agent":   {name: "agent", uid: 1000},
	"tool":    {name: "tool", parent: "agent", uid: 1000},
	"helper":  {name: "helper", parent: "tool", uid: 1000},
	"sibling": {name: "sibling", uid: 1000},
	"other":   {name: "other", uid: 2000},
	"nested2": {name: "nested2", parent: "other", uid: 2000},
}

func lookup(name string) (sessionRef, bool) {
	s, ok := sessions[name]
	return s, ok
}

// visibleTo lists the sessions c sees, sorted.
func visibleTo(c caller) []string {
	var out []string
	for name, s := range sessions {
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

func TestWhoMayCreateAndAsWhom(t *testing.T) {
	for _, tc := range []struct {
		c      caller
		user   string
		create string
		runAs  string
	}{
		{caller{uid: 0}, "", "", ""},
		{caller{uid: 0}, "nobody", "", ""},
		{caller{uid: 1000, creator: true}, "", "", ""},
		{caller{uid: 1000, creator: true}, "nobody", "", "only root may run a session as another user"},
		{caller{uid: 1000, admin: true}, "", `only root and members of group "sluice"`, ""},
		{caller{uid: 1000}, "", `only root and members of group "sluice"`, ""},
	} {
		checkRefusal(t, "mayCreate", tc.c, tc.c.mayCreate("sluice"), tc.create)
		checkRefusal(t, "mayRunAs("+tc.user+")", tc.c, tc.c.mayRunAs(tc.user), tc.runAs)
	}
}

func policy(t *testing.T, entries ...string) *allowlist.Policy {
	t.Helper()
	p, err := allowlist.FromStrings(entries)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func entries(p *allowlist.Policy) []string {
	var out []string
	for _, e := range p.Entries() {
		out = append(out, e.String())
	}
	slices.Sort(out)
	return out
}

func TestASessionOnlyNarrows(t *testing.T) {
	machine := policy(t, "*.example.test", "api.other.test", "198.51.100.0/24")
	parent := policy(t, "api.example.test", "198.51.100.0/28")
	free := caller{uid: 1000, creator: true}
	inside := caller{uid: 1000, creator: true, confined: true, session: "agent"}
	for _, tc := range []struct {
		name      string
		c         caller
		requested *allowlist.Policy
		own       *allowlist.Policy
		want      []string // the enforced policy; nil with refusal set
		refusal   string
	}{
		{"no request: the machine allowlist", free, nil, nil, entries(machine), ""},
		{"a narrower request", free, policy(t, "api.example.test", "198.51.100.7"), nil, []string{"198.51.100.7", "api.example.test"}, ""},
		{"a name beyond the machine", free, policy(t, "evil.test"), nil, nil, "only narrow the machine allowlist"},
		{"a wider CIDR", free, policy(t, "198.51.100.0/23"), nil, nil, "only narrow the machine allowlist"},
		{"confined, no request: its parent's policy", inside, nil, parent, []string{"198.51.100.0/28", "api.example.test"}, ""},
		{"confined, narrower than its parent", inside, policy(t, "198.51.100.3"), parent, []string{"198.51.100.3"}, ""},
		{"confined, within the machine but beyond its parent", inside, policy(t, "api.other.test"), parent, nil, "only narrow its own session's policy"},
		{"confined, beyond the machine", inside, policy(t, "evil.test"), parent, nil, "only narrow the machine allowlist"},
		{"confined outside this daemon", caller{uid: 1000, creator: true, confined: true}, nil, nil, nil, "outside this daemon's sessions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := sessionRequest(tc.c, tc.requested, machine, tc.own)
			if tc.refusal != "" {
				checkRefusal(t, "sessionRequest", tc.c, err, tc.refusal)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := entries(intersect(req, machine)); !slices.Equal(got, tc.want) {
				t.Errorf("enforced %q, want %q", got, tc.want)
			}
		})
	}
}

// The local part (unix sockets, loopback mode) narrows like entries, and a
// nested session that does not name a loopback mode keeps its parent's.
func TestASessionOnlyNarrowsLocal(t *testing.T) {
	machine, err := allowlist.Parse([]byte(`{"allowed_hosts": ["198.51.100.0/24"], "unix_sockets": ["/run/user/*/pulse/native"]}`))
	if err != nil {
		t.Fatal(err)
	}
	parent, err := allowlist.Parse([]byte(`{"allowed_hosts": ["198.51.100.0/28"], "loopback": "session", "loopback_ports": [11434]}`))
	if err != nil {
		t.Fatal(err)
	}
	free := caller{uid: 1000, creator: true}
	inside := caller{uid: 1000, creator: true, confined: true, session: "agent"}
	docker, _ := allowlist.Parse([]byte(`{"allowed_hosts": [], "unix_sockets": ["/var/run/docker.sock"]}`))
	if _, err := sessionRequest(free, docker, machine, nil); err == nil {
		t.Error("a session listed a unix socket the machine does not")
	}
	pulse, _ := allowlist.Parse([]byte(`{"allowed_hosts": [], "unix_sockets": ["/run/user/1000/pulse/native"]}`))
	req, err := sessionRequest(free, pulse, machine, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := intersect(req, machine).Local().UnixSockets; !slices.Equal(got, []string{"/run/user/1000/pulse/native"}) {
		t.Errorf("enforced unix_sockets %q", got)
	}
	req, err = sessionRequest(inside, policy(t, "198.51.100.3"), machine, parent)
	if err != nil {
		t.Fatal(err)
	}
	if l := intersect(req, machine).Local(); !l.Loopback.Strict() || !slices.Equal(l.LoopbackPorts, []uint16{11434}) {
		t.Errorf("a nested session left its parent's loopback mode: %+v", l)
	}
	all, _ := allowlist.Parse([]byte(`{"allowed_hosts": [], "loopback": "all"}`))
	if _, err := sessionRequest(inside, all, machine, parent); err == nil {
		t.Error(`a nested session asked for "loopback": "all" under a parent in "session" mode`)
	}
}

// When the machine allowlist shrinks, every session is narrowed again:
// what the machine dropped is gone from the session, the rest stays.
func TestIntersectAfterTheMachineShrinks(t *testing.T) {
	requested := policy(t, "api.example.test", "198.51.100.7")
	shrunk := policy(t, "198.51.100.0/24")
	if got, want := entries(intersect(requested, shrunk)), []string{"198.51.100.7"}; !slices.Equal(got, want) {
		t.Errorf("intersect = %q, want %q", got, want)
	}
	if got := entries(intersect(requested, policy(t))); len(got) != 0 {
		t.Errorf("intersect with an empty machine allowlist = %q, want nothing", got)
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

// An unconfined caller's environment chooses its session's $SSH_AUTH_SOCK;
// a confined caller's is bounded by what its own session was given, and a
// session given none bounds it to none (never "no bound").
func TestEnvSocketBounds(t *testing.T) {
	if b := envSocketBounds(caller{uid: 1000}, []string{"/x"}); b != nil {
		t.Errorf("unconfined caller: bound %q, want none", *b)
	}
	own := []string{"/tmp/ssh-x/agent.1"}
	b := envSocketBounds(caller{uid: 1000, confined: true, session: "agent"}, own)
	if b == nil || !slices.Equal(*b, own) {
		t.Fatalf("confined caller: bound %v, want %q", b, own)
	}
	own[0] = "/var/run/docker.sock"
	if (*b)[0] != "/tmp/ssh-x/agent.1" {
		t.Error("the bound shares the parent's slice")
	}
	if b := envSocketBounds(caller{uid: 1000, confined: true, session: "agent"}, nil); b == nil || len(*b) != 0 {
		t.Errorf("confined caller whose session was given none: bound %v, want an empty one", b)
	}
}
