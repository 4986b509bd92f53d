// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"path/filepath"
	"strings"
)

// mayShareProcesses is the rule for share_processes, which turns a
// session's process isolation off: a confined caller may not ask for it.
// The new session's command is the daemon's child, outside the caller's
// Landlock domain, so it would reach the user's processes that the
// caller's own session keeps out of reach.
func mayShareProcesses(c Caller, requested bool) error {
	if requested && c.Confined {
		return failf(Forbidden, "share_processes: a confined caller may not turn process isolation off")
	}
	return nil
}

// mayAllowUserNamespaces is the rule for allow_userns: a confined caller may not
// ask for it, since its own session refuses it user namespaces and the
// new session would be a way round that.
func mayAllowUserNamespaces(c Caller, requested bool) error {
	if requested && c.Confined {
		return failf(Forbidden, "allow_userns: a confined caller may not allow user namespaces")
	}
	return nil
}

// DefaultDockerHost is the engine's socket when the request names none.
const DefaultDockerHost = "/var/run/docker.sock"

// mayUseDocker is the rule for docker: the session's broker reaches the
// machine's engine as root, so an unconfined caller may ask for it (and
// name the engine's socket) only if it could use that engine itself:
// root, or a user who may connect to the engine's socket (its owner, or
// in its group, as the docker group is), as engineAccess says. For
// anyone else a judged engine would be more than they have: a container
// of theirs runs as the engine's root, and the workspace it may bind is
// theirs to run what it leaves there. A confined caller may not: the
// engine is outside its session, whatever its user may do elsewhere.
func mayUseDocker(c Caller, docker bool, host string, engineAccess func(path string, c Caller) error) error {
	if !docker && host == "" {
		return nil
	}
	if c.Confined {
		return failf(Forbidden, "docker: a confined caller may not give a session a Docker socket: the engine is outside its own session")
	}
	if host != "" && !docker {
		return failf(Invalid, "docker_host without docker")
	}
	p := strings.TrimPrefix(host, "unix://")
	if host != "" && !filepath.IsAbs(p) {
		return failf(Invalid, "docker_host %q: the engine's unix socket, an absolute path or unix://PATH", host)
	}
	if c.UID == 0 {
		return nil
	}
	if p == "" {
		p = DefaultDockerHost
	}
	if engineAccess == nil {
		return failf(Forbidden, "docker: only root may give a session a Docker socket here (sudo sluice run --docker)")
	}
	if err := engineAccess(p, c); err != nil {
		return wrapf(Forbidden, err, "docker: a session's Docker socket is for users who may use the engine themselves (root, or its socket's group, e.g. docker)")
	}
	return nil
}
