// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
)

// withOwn is c confined in a session with policy own (nil: c as it is).
func withOwn(c Caller, own *allowlist.Policy) Caller {
	if own != nil && c.Own != nil {
		p := *c.Own
		p.Policy = own
		c.Own = &p
	}
	return c
}

// checkRefusal wants err nil for want "", else a Forbidden error
// containing want.
func checkRefusal(t *testing.T, what string, c Caller, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("%+v %s: %v, want allowed", c, what, err)
		}
		return
	}
	var se *Error
	if !errors.As(err, &se) || se.Kind != Forbidden || !strings.Contains(se.Msg, want) {
		t.Errorf("%+v %s = %v, want a refusal containing %q", c, what, err, want)
	}
}

func TestWhoMayCreateAndAsWhom(t *testing.T) {
	for _, tc := range []struct {
		c      Caller
		user   string
		create string
		runAs  string
	}{
		{Caller{UID: 0}, "", "", ""},
		{Caller{UID: 0}, "nobody", "", ""},
		{Caller{UID: 1000, Creator: true}, "", "", ""},
		{Caller{UID: 1000, Creator: true}, "nobody", "", "only root may run a session as another user"},
		{Caller{UID: 1000, Creator: false}, "", `only root and members of group "sluice"`, ""},
		{Caller{UID: 1000}, "", `only root and members of group "sluice"`, ""},
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
	free := Caller{UID: 1000, Creator: true}
	inside := Caller{UID: 1000, Creator: true, Confined: true, Own: &Parent{Name: "agent"}}
	for _, tc := range []struct {
		name      string
		c         Caller
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
		{"confined outside this daemon", Caller{UID: 1000, Creator: true, Confined: true}, nil, nil, nil, "outside this daemon's sessions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := Request(withOwn(tc.c, tc.own), tc.requested, machine)
			if tc.refusal != "" {
				checkRefusal(t, "Request", tc.c, err, tc.refusal)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := entries(Intersect(req, machine)); !slices.Equal(got, tc.want) {
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
	free := Caller{UID: 1000, Creator: true}
	inside := Caller{UID: 1000, Creator: true, Confined: true, Own: &Parent{Name: "agent"}}
	docker, _ := allowlist.Parse([]byte(`{"allowed_hosts": [], "unix_sockets": ["/var/run/docker.sock"]}`))
	if _, err := Request(free, docker, machine); err == nil {
		t.Error("a session listed a unix socket the machine does not")
	}
	pulse, _ := allowlist.Parse([]byte(`{"allowed_hosts": [], "unix_sockets": ["/run/user/1000/pulse/native"]}`))
	req, err := Request(free, pulse, machine)
	if err != nil {
		t.Fatal(err)
	}
	if got := Intersect(req, machine).Local().UnixSockets; !slices.Equal(got, []string{"/run/user/1000/pulse/native"}) {
		t.Errorf("enforced unix_sockets %q", got)
	}
	req, err = Request(withOwn(inside, parent), policy(t, "198.51.100.3"), machine)
	if err != nil {
		t.Fatal(err)
	}
	if l := Intersect(req, machine).Local(); !l.Loopback.Strict() || !slices.Equal(l.LoopbackPorts, []uint16{11434}) {
		t.Errorf("a nested session left its parent's loopback mode: %+v", l)
	}
	all, _ := allowlist.Parse([]byte(`{"allowed_hosts": [], "loopback": "all"}`))
	if _, err := Request(withOwn(inside, parent), all, machine); err == nil {
		t.Error(`a nested session asked for "loopback": "all" under a parent in "session" mode`)
	}
}

// When the machine allowlist shrinks, every session is narrowed again:
// what the machine dropped is gone from the session, the rest stays.
func TestIntersectAfterTheMachineShrinks(t *testing.T) {
	requested := policy(t, "api.example.test", "198.51.100.7")
	shrunk := policy(t, "198.51.100.0/24")
	if got, want := entries(Intersect(requested, shrunk)), []string{"198.51.100.7"}; !slices.Equal(got, want) {
		t.Errorf("intersect = %q, want %q", got, want)
	}
	if got := entries(Intersect(requested, policy(t))); len(got) != 0 {
		t.Errorf("intersect with an empty machine allowlist = %q, want nothing", got)
	}
}

// An unconfined caller's environment chooses its session's $SSH_AUTH_SOCK;
// a confined caller's is bounded by what its own session was given, and a
// session given none bounds it to none (never "no bound").
func TestEnvSocketBounds(t *testing.T) {
	if b := envSocketBounds(Caller{UID: 1000}); b != nil {
		t.Errorf("unconfined caller: bound %q, want none", *b)
	}
	own := []string{"/tmp/ssh-x/agent.1"}
	b := envSocketBounds(Caller{UID: 1000, Confined: true, Own: &Parent{Name: "agent", EnvSockets: own}})
	if b == nil || !slices.Equal(*b, own) {
		t.Fatalf("confined caller: bound %v, want %q", b, own)
	}
	own[0] = "/var/run/docker.sock"
	if (*b)[0] != "/tmp/ssh-x/agent.1" {
		t.Error("the bound shares the parent's slice")
	}
	if b := envSocketBounds(Caller{UID: 1000, Confined: true, Own: &Parent{Name: "agent"}}); b == nil || len(*b) != 0 {
		t.Errorf("confined caller whose session was given none: bound %v, want an empty one", b)
	}
}
