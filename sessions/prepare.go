// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/sandbox"
)

// Machine is what bounds every session of a service.
type Machine struct {
	// Policy is the machine allowlist; nil: no bound (the in-process
	// service of `sluice run`, whose root caller chose the policy).
	Policy *allowlist.Policy
	// ReadOnly are the machine's read-only paths, which no session
	// removes.
	ReadOnly []string
	// SessionGroup names the group whose members may create sessions, for
	// the refusal's message.
	SessionGroup string
	// LookupUser resolves a request's USER[:GROUP] (cgroups.LookupUser).
	LookupUser func(spec string) (cgroups.SpawnOptions, error)
	// EngineAccess says why the caller c may not connect to the Docker
	// engine's socket at path, nil when it may (EngineAccess on Linux);
	// nil: only root may ask for a Docker socket.
	EngineAccess func(path string, c Caller) error
}

// Plan is a request the rules accepted: everything the service needs to
// start the session, decided before anything is created.
type Plan struct {
	Req api.CreateRequest
	// Caller is who asked.
	Caller Caller
	// Spawn is whom the command runs as (never root).
	Spawn cgroups.SpawnOptions
	// Requested is what the session asks for from now on (nil: whatever
	// the machine allows); Policy what it enforces now,
	// Intersect(Requested, machine).
	Requested, Policy *allowlist.Policy
	// Hidden and ReadOnly are the session's file system rules.
	Hidden   sandbox.Hidden
	ReadOnly sandbox.ReadOnly
	// Path is the command's executable, with a '/' in it.
	Path string
	// EnvSocketsWithin bounds the built-in unix sockets the command's
	// environment chooses (nil: no bound).
	EnvSocketsWithin *[]string
}

// Parent is the name of the session the caller runs in, or "".
func (p *Plan) Parent() string {
	if p.Caller.Own == nil {
		return ""
	}
	return p.Caller.Own.Name
}

// Prepare applies every rule of a new session to req, asked for by c and
// bounded by m, and returns the plan, or the first refusal; nothing is
// created either way. parsed, when not nil, is req's policy already
// parsed by an in-process front door (req.Allow and req.Allowlist are
// then not read). files is the number of descriptors that came with the
// request (stdin, stdout and stderr are needed).
func Prepare(c Caller, req api.CreateRequest, m Machine, parsed *allowlist.Policy, files int) (*Plan, error) {
	if err := c.mayCreate(m.SessionGroup); err != nil {
		return nil, err
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, failf(Invalid, "argv: a command is required")
	}
	if req.PidsMax < 0 || req.MemoryMax < 0 {
		return nil, failf(Invalid, "pids_max and memory_max must not be negative")
	}
	spawn := cgroups.SpawnOptions{UID: c.UID, GID: c.GID, Groups: slices.Clone(c.Groups)}
	if err := c.mayRunAs(req.User); err != nil {
		return nil, err
	}
	if req.User != "" {
		if m.LookupUser == nil {
			return nil, failf(Invalid, "user %q: users cannot be looked up here", req.User)
		}
		o, err := m.LookupUser(req.User)
		if err != nil {
			return nil, wrapf(Invalid, err, "user %q", req.User)
		}
		spawn = o
	}
	if spawn.UID == 0 {
		return nil, failf(Invalid, "sluice never runs the command as root (it could leave its cgroup): pass user")
	}
	requested := parsed
	if requested == nil && (len(req.Allow) > 0 || len(req.Allowlist) > 0) {
		var err error
		if requested, err = allowlist.FromStrings(req.Allow); err != nil {
			return nil, failf(Invalid, "allow: %v", err)
		}
		if len(req.Allowlist) > 0 {
			doc, err := allowlist.Parse(req.Allowlist)
			if err != nil {
				return nil, failf(Invalid, "allowlist: %v", err)
			}
			requested = requested.Merge(doc)
		}
	}
	// "docker": true in the session's own policy file is --docker; a
	// machine policy's never is (the daemon refuses such a file), and a
	// confined caller's inherited policy is not its request.
	if requested.Docker() {
		req.Docker = true
	}
	requested, err := Request(c, requested, m.Policy)
	if err != nil {
		return nil, err
	}
	ownAudit := c.Own != nil && c.Own.Audit
	if err := mayAudit(c, ownAudit, req.Audit); err != nil {
		return nil, err
	}
	if err := mayAsk(c, req.Ask, req.Audit); err != nil {
		return nil, err
	}
	if err := mayAllowUserNamespaces(c, req.AllowUserNamespaces); err != nil {
		return nil, err
	}
	if err := mayShareProcesses(c, req.ShareProcesses); err != nil {
		return nil, err
	}
	if err := mayUseDocker(c, req.Docker, req.DockerHost, m.EngineAccess); err != nil {
		return nil, err
	}
	// Hidden paths: the defaults and the session's own (which show_paths
	// may exempt), and the machine's, which nothing exempts.
	var machineHidden, ownHidden []string
	if m.Policy != nil {
		machineHidden = m.Policy.HiddenPaths()
	}
	if requested != nil {
		ownHidden = requested.HiddenPaths()
	}
	hidden, err := sandbox.HiddenPaths(machineHidden, ownHidden, req.ShowPaths)
	if err != nil {
		return nil, failf(Invalid, "%v", err)
	}
	readOnly, err := sandbox.ReadOnlyPaths(m.ReadOnly, req.ReadOnlyPaths)
	if err != nil {
		return nil, failf(Invalid, "read_only_paths: %v", err)
	}
	// Descriptors last: a request that is wrong anyway says so first.
	if files != 3 {
		return nil, failf(Invalid, "pass stdin, stdout and stderr with the request (got %d descriptors)", files)
	}
	path := req.Path
	if path == "" {
		path = req.Argv[0]
	}
	if !strings.Contains(path, "/") {
		return nil, failf(Invalid, "%s: command not found (pass an absolute path)", req.Argv[0])
	}
	req.Argv = slices.Clone(req.Argv)
	return &Plan{Req: req, Caller: c, Spawn: spawn, Requested: requested, Policy: Intersect(requested, m.Policy),
		Hidden: hidden, ReadOnly: readOnly, Path: path, EnvSocketsWithin: envSocketBounds(c)}, nil
}
