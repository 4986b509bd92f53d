// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/cgroups"
)

// errNoUser is what the test's user database says of unknown users.
var errNoUser = errors.New("no such user")

func testMachine(t *testing.T) Machine {
	t.Helper()
	p, err := allowlist.Parse([]byte(`{"allowed_hosts": ["*.example.test", "198.51.100.0/24"], "hidden_paths": ["/etc/machine-secret"]}`))
	if err != nil {
		t.Fatal(err)
	}
	return Machine{Policy: p, ReadOnly: []string{"/srv/ro"}, SessionGroup: "sluice",
		LookupUser: func(spec string) (cgroups.SpawnOptions, error) {
			switch spec {
			case "nobody":
				return cgroups.SpawnOptions{UID: 65534, GID: 65534}, nil
			case "root":
				return cgroups.SpawnOptions{}, nil
			}
			return cgroups.SpawnOptions{}, errNoUser
		}}
}

// Every refusal of Prepare, each with its kind, before anything is made:
// the rules that once needed a daemon and root to be seen.
func TestPrepareRefuses(t *testing.T) {
	m := testMachine(t)
	user := Caller{UID: 1000, GID: 1000, Creator: true}
	root := Caller{UID: 0, Creator: true}
	ok := api.CreateRequest{Argv: []string{"/bin/true"}}
	with := func(f func(*api.CreateRequest)) api.CreateRequest {
		r := ok
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name  string
		c     Caller
		req   api.CreateRequest
		files int
		kind  Kind
		want  string
	}{
		{"not in the session group", Caller{UID: 1000}, ok, 3, Forbidden, `members of group "sluice"`},
		{"no command", user, api.CreateRequest{}, 3, Invalid, "a command is required"},
		{"negative limit", user, with(func(r *api.CreateRequest) { r.PidsMax = -1 }), 3, Invalid, "must not be negative"},
		{"a user runs as another", user, with(func(r *api.CreateRequest) { r.User = "nobody" }), 3, Forbidden, "only root may run"},
		{"unknown user", root, with(func(r *api.CreateRequest) { r.User = "ghost" }), 3, Invalid, "no such user"},
		{"root names no user", root, ok, 3, Invalid, "never runs the command as root"},
		{"root names root", root, with(func(r *api.CreateRequest) { r.User = "root" }), 3, Invalid, "never runs the command as root"},
		{"bad entry", user, with(func(r *api.CreateRequest) { r.Allow = []string{"exa mple.test"} }), 3, Invalid, "allow:"},
		{"bad allowlist", user, with(func(r *api.CreateRequest) { r.Allowlist = []byte(`{"allowed_hosts": 1}`) }), 3, Invalid, "allowlist:"},
		{"wider than the machine", user, with(func(r *api.CreateRequest) { r.Allow = []string{"evil.test"} }), 3, Forbidden, "only narrow the machine allowlist"},
		{"confined asks for audit", Caller{UID: 1000, Creator: true, Confined: true, Own: &Parent{Name: "a", Policy: m.Policy}},
			with(func(r *api.CreateRequest) { r.Audit = true }), 3, Forbidden, "audit-mode"},
		{"relative show path", user, with(func(r *api.CreateRequest) { r.ShowPaths = []string{"rel/x"} }), 3, Invalid, ""},
		{"unclean read-only path", user, with(func(r *api.CreateRequest) { r.ReadOnlyPaths = []string{"/srv/../etc"} }), 3, Invalid, "read_only_paths"},
		{"two descriptors", user, ok, 2, Invalid, "got 2 descriptors"},
		{"a bare command name", user, with(func(r *api.CreateRequest) { r.Argv = []string{"true"} }), 3, Invalid, "pass an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Prepare(tc.c, tc.req, m, nil, tc.files)
			if err == nil {
				t.Fatalf("prepared %+v, want a refusal", p)
			}
			if KindOf(err) != tc.kind || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v (kind %d), want kind %d containing %q", err, KindOf(err), tc.kind, tc.want)
			}
		})
	}
}

// What an accepted request becomes: whom it runs as, what it enforces,
// what is hidden and read-only, and the in-process door's own policy.
func TestPreparePlans(t *testing.T) {
	m := testMachine(t)
	user := Caller{UID: 1000, GID: 1000, Groups: []uint32{27}, Creator: true}
	req := api.CreateRequest{Argv: []string{"agent"}, Path: "/usr/bin/agent", Allow: []string{"api.example.test"},
		Allowlist: []byte(`{"allowed_hosts": ["198.51.100.7"], "hidden_paths": ["~/.netrc"]}`),
		ShowPaths: []string{"~/.netrc", "/etc/machine-secret"}, ReadOnlyPaths: []string{"/srv/ro", "/opt/tools"}}
	p, err := Prepare(user, req, m, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.Spawn.UID != 1000 || p.Spawn.GID != 1000 || !slices.Equal(p.Spawn.Groups, []uint32{27}) {
		t.Errorf("runs as %+v, want the caller", p.Spawn)
	}
	if got := entries(p.Policy); !slices.Equal(got, []string{"198.51.100.7", "api.example.test"}) {
		t.Errorf("enforces %q", got)
	}
	if p.Path != "/usr/bin/agent" || p.Parent() != "" || p.EnvSocketsWithin != nil {
		t.Errorf("path %q parent %q bound %v", p.Path, p.Parent(), p.EnvSocketsWithin)
	}
	// show_paths exempts the session's own hidden path, never the
	// machine's.
	if !slices.Contains(p.Hidden.Machine, "/etc/machine-secret") || !slices.Contains(p.Hidden.Shown, "/etc/machine-secret") {
		t.Errorf("hidden %+v: the machine's path must stay in Machine whatever Shown says", p.Hidden)
	}
	if !slices.Contains(p.Hidden.Patterns, "~/.netrc") {
		t.Errorf("hidden %+v: the session's own pattern is missing", p.Hidden)
	}
	if !slices.Equal(p.ReadOnly.Machine, []string{"/srv/ro"}) || !slices.Contains(p.ReadOnly.Session, "/opt/tools") {
		t.Errorf("read-only %+v", p.ReadOnly)
	}

	// Root names the user; no request: the machine's allowlist.
	p, err = Prepare(Caller{UID: 0, Creator: true}, api.CreateRequest{Argv: []string{"/bin/true"}, User: "nobody"}, m, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.Spawn.UID != 65534 || p.Requested != nil || p.Policy != m.Policy {
		t.Errorf("root's request: spawn %+v requested %v", p.Spawn, p.Requested)
	}

	// In-process (no machine bound): the parsed policy is the session's,
	// the request's strings are not read, and its hidden paths can be
	// shown.
	own, err := allowlist.Parse([]byte(`{"allowed_hosts": ["anything.test"], "hidden_paths": ["/etc/own-secret"]}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err = Prepare(Caller{UID: 0, Creator: true}, api.CreateRequest{Argv: []string{"/bin/true"}, User: "nobody", Allow: []string{"not parsed"},
		ShowPaths: []string{"/etc/own-secret"}}, Machine{LookupUser: m.LookupUser}, own, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := entries(p.Policy); !slices.Equal(got, []string{"anything.test"}) || len(p.Hidden.Machine) != 0 {
		t.Errorf("in-process: enforces %q, machine-hidden %q", got, p.Hidden.Machine)
	}

	// A confined caller: its session is the parent, its sockets the bound.
	inside := Caller{UID: 1000, GID: 1000, Creator: true, Confined: true,
		Own: &Parent{Name: "agent", Policy: m.Policy, EnvSockets: []string{"/tmp/ssh-x/agent.1"}}}
	p, err = Prepare(inside, api.CreateRequest{Argv: []string{"/bin/true"}}, m, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.Parent() != "agent" || p.EnvSocketsWithin == nil || !slices.Equal(*p.EnvSocketsWithin, []string{"/tmp/ssh-x/agent.1"}) {
		t.Errorf("nested: parent %q bound %v", p.Parent(), p.EnvSocketsWithin)
	}
}

// "docker": true in the session's own policy is --docker, with its rule;
// the machine's policy and a confined caller's inherited one never ask.
func TestPrepareDockerKey(t *testing.T) {
	m := testMachine(t)
	root := Caller{UID: 0, Creator: true}
	req := api.CreateRequest{Argv: []string{"/bin/true"}, User: "nobody",
		Allowlist: []byte(`{"allowed_hosts": ["a.example.test"], "docker": true}`)}
	p, err := Prepare(root, req, m, nil, 3)
	if err != nil || !p.Req.Docker {
		t.Fatalf("root, docker in the allowlist: %v, docker %v", err, p != nil && p.Req.Docker)
	}
	own, err := allowlist.Parse([]byte(`{"allowed_hosts": ["anything.test"], "docker": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := Prepare(root, api.CreateRequest{Argv: []string{"/bin/true"}, User: "nobody"}, Machine{LookupUser: m.LookupUser}, own, 3); err != nil || !p.Req.Docker {
		t.Errorf("in-process, docker in the parsed policy: %v", err)
	}
	off := api.CreateRequest{Argv: []string{"/bin/true"}, User: "nobody", Allowlist: []byte(`{"docker": false}`)}
	if p, err := Prepare(root, off, m, nil, 3); err != nil || p.Req.Docker {
		t.Errorf(`"docker": false: %v`, err)
	}
	// The rule of --docker holds: a user may not, unless the machine's
	// engine access says it may use the engine.
	user := Caller{UID: 1000, GID: 1000, Creator: true}
	ureq := req
	ureq.User = ""
	if _, err := Prepare(user, ureq, m, nil, 3); KindOf(err) != Forbidden || !strings.Contains(err.Error(), "only root") {
		t.Errorf("a user's docker key: %v", err)
	}
	um := m
	um.EngineAccess = func(path string, c Caller) error {
		if c.UID == 1000 && path == DefaultDockerHost {
			return nil
		}
		return errors.New("no")
	}
	if p, err := Prepare(user, ureq, um, nil, 3); err != nil || !p.Req.Docker {
		t.Errorf("a user who may use the engine, docker key: %v", err)
	}
	if _, err := Prepare(Caller{UID: 1001, GID: 1001, Creator: true}, ureq, um, nil, 3); KindOf(err) != Forbidden {
		t.Errorf("a user who may not use the engine, docker key: %v", err)
	}
	// A machine policy that says docker asks for nothing.
	mm := m
	mm.Policy = m.Policy.WithDocker(true)
	if p, err := Prepare(root, api.CreateRequest{Argv: []string{"/bin/true"}, User: "nobody"}, mm, nil, 3); err != nil || p.Req.Docker {
		t.Errorf("the machine's docker key gave the session docker: %v", err)
	}
	// Nor does a confined caller's own policy when it requests nothing.
	inside := Caller{UID: 1000, GID: 1000, Creator: true, Confined: true, Own: &Parent{Name: "agent", Policy: m.Policy.WithDocker(true)}}
	if p, err := Prepare(inside, api.CreateRequest{Argv: []string{"/bin/true"}}, m, nil, 3); err != nil || p.Req.Docker {
		t.Errorf("a nested session inherited docker: %v", err)
	}
}
