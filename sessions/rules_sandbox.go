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

// mayUseDocker is the rule for docker: the session's broker reaches the
// machine's engine as root, so only an unconfined root caller may ask for
// it (and name the engine's socket) until the machine's configuration
// says who else may.
func mayUseDocker(c Caller, docker bool, host string) error {
	if !docker && host == "" {
		return nil
	}
	if c.UID != 0 || c.Confined {
		return failf(Forbidden, "docker: only an unconfined root caller may give a session a Docker socket (sudo sluice run --docker)")
	}
	if host != "" && !docker {
		return failf(Invalid, "docker_host without docker")
	}
	if p := strings.TrimPrefix(host, "unix://"); host != "" && !filepath.IsAbs(p) {
		return failf(Invalid, "docker_host %q: the engine's unix socket, an absolute path or unix://PATH", host)
	}
	return nil
}
