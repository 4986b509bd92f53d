package daemon

import (
	"fmt"
	"net/http"
	"os"

	"golang.org/x/sys/unix"
)

// sameWorld checks that the peer sees the network and the root file system
// the daemon sees. The daemon starts the command itself, in its own
// namespaces: a client in a container that can reach the socket (a
// bind-mounted /run/sluice) would otherwise get a command running on the
// host's file system and network as its uid, outside the container it
// was put in. The mount namespace itself is not compared: the shipped
// systemd unit gives the daemon one of its own (ProtectSystem=), whose
// root is still the host's.
func sameWorld(p peer) error {
	pid := p.PID
	if pid <= 0 {
		return fail(http.StatusForbidden, "the caller's process is not visible to the daemon (another pid namespace?): a session is started only for callers that share the daemon's network and root file system")
	}
	proc := fmt.Sprintf("/proc/%d", pid)
	mine, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return fmt.Errorf("read the daemon's network namespace: %w", err)
	}
	theirs, err := os.Readlink(proc + "/ns/net")
	if err != nil {
		return fail(http.StatusForbidden, "read the caller's network namespace: %v", err)
	}
	if theirs != mine {
		return fail(http.StatusForbidden, "the caller is in another network namespace (%s, the daemon's is %s; a container?): the command would run in the daemon's network instead; run sluice inside that namespace, or the client where the daemon runs", theirs, mine)
	}
	var root, theirRoot unix.Stat_t
	if err := unix.Stat("/", &root); err != nil {
		return fmt.Errorf("stat the daemon's root: %w", err)
	}
	if err := unix.Stat(proc+"/root/", &theirRoot); err != nil {
		return fail(http.StatusForbidden, "stat the caller's root directory: %v", err)
	}
	if root.Dev != theirRoot.Dev || root.Ino != theirRoot.Ino {
		return fail(http.StatusForbidden, "the caller has another root file system (a container or chroot?): the command would run on the daemon's file system instead; run sluice inside it, or the client where the daemon runs")
	}
	if !p.alive() {
		// What /proc said may have been about a process that got the
		// caller's pid after it exited.
		return fail(http.StatusForbidden, "the process that connected has exited, so it cannot be identified: a session is started only for a caller that waits for the answer")
	}
	return nil
}
