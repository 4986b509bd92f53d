// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/callerns"
)

// callerWorld decides where the peer's command runs. A peer that sees the
// network and the root file system the daemon sees gets it there
// (joined false). A peer in another network namespace or with another
// root (a container that can reach the socket through a bind-mounted
// /run/sluice) would otherwise get a command running on the host's file
// system and network as its uid, outside the container it was put in: it
// is refused, unless the daemon's configuration (ContainerCallers) lets
// it in, and then its command starts in its own namespaces (joined true,
// package callerns). The mount namespace itself is not compared: the
// shipped systemd unit gives the daemon one of its own (ProtectSystem=),
// whose root is still the host's.
func (s *Server) callerWorld(p peer) (joined bool, err error) {
	pid := p.PID
	if pid <= 0 {
		return false, fail(http.StatusForbidden, "the caller's process is not visible to the daemon (another pid namespace?): a session is started only for callers that share the daemon's network and root file system")
	}
	proc := fmt.Sprintf("/proc/%d", pid)
	// thread-self, not self: /proc/self/ns/net is the main thread's, and
	// a name verifier's dialling thread, locked inside a container's
	// namespace for the session's life, may be the main thread; this
	// goroutine's thread is not locked, so it is in the daemon's own.
	mine, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		return false, fmt.Errorf("read the daemon's network namespace: %w", err)
	}
	theirs, err := os.Readlink(proc + "/ns/net")
	if err != nil {
		return false, fail(http.StatusForbidden, "read the caller's network namespace: %v", err)
	}
	var why string
	if theirs != mine {
		why = fmt.Sprintf("the caller is in another network namespace (%s, the daemon's is %s; a container?): the command would run in the daemon's network instead", theirs, mine)
	} else {
		var root, theirRoot unix.Stat_t
		if err := unix.Stat("/", &root); err != nil {
			return false, fmt.Errorf("stat the daemon's root: %w", err)
		}
		if err := unix.Stat(proc+"/root/", &theirRoot); err != nil {
			return false, fail(http.StatusForbidden, "stat the caller's root directory: %v", err)
		}
		if root.Dev != theirRoot.Dev || root.Ino != theirRoot.Ino {
			why = "the caller has another root file system (a container or chroot?): the command would run on the daemon's file system instead"
		}
	}
	if why != "" {
		if !s.containerCallers.Permits(callerOf(p)) {
			return false, fail(http.StatusForbidden, "%s; run sluice inside that namespace, or the client where the daemon runs, or let this caller's sessions run in its own namespaces (container_callers in the daemon's configuration, or sluice daemon --container-caller RULE)", why)
		}
		if err := callerns.Check(p.pidfd); err != nil {
			return false, fail(http.StatusForbidden, "%v", err)
		}
		joined = true
	}
	if !p.alive() {
		// What /proc said may have been about a process that got the
		// caller's pid after it exited.
		return false, fail(http.StatusForbidden, "the process that connected has exited, so it cannot be identified: a session is started only for a caller that waits for the answer")
	}
	return joined, nil
}

// callerOf is p as the container-caller rules see it. Its cgroup is read
// from /proc; the caller checks afterwards that p is still alive, so the
// line was p's.
func callerOf(p peer) callerns.Caller {
	c := callerns.Caller{UID: p.UID, GIDs: append([]uint32{p.GID}, p.Groups...)}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.PID)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if path, ok := strings.CutPrefix(line, "0::"); ok {
				c.Cgroup = path
			}
		}
	}
	return c
}

// joinedNote is what session_started adds for a session started in its
// caller's namespaces: which process's, as the daemon sees its pid.
func joinedNote(joined bool, p peer) string {
	if !joined {
		return ""
	}
	return fmt.Sprintf(" in the namespaces of its caller, pid %d (a container caller)", p.PID)
}
