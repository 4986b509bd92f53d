// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/sessions"
)

// Whole containers as sessions.
//
// `docker run --cgroup-parent=<sluice root> ...` (the root is /sluice, or
// /$SLUICE_INSTANCE) makes the engine create the container's cgroup as a
// child of sluice's cgroup root, where the datapath is attached. Every
// process of the container lives there: its entrypoint, `docker exec`
// shells, an IDE's server, postStartCommand. Until the daemon attaches the
// cgroup as a session, the datapath refuses all of its traffic but
// loopback (a cgroup under the root that is no session is refused, fail
// closed), so the container is confined from its first instruction; within
// moments the daemon gives it the machine allowlist, and starts the
// session's resolver and proxy on the container's own loopback (its
// network namespace, found through one of its processes).
//
// Why --cgroup-parent and not an OCI hook or a wrapper command: it is one
// standard `docker run` flag (devcontainer.json "runArgs"), it needs no
// engine configuration or privileged code inside the container, and it
// covers the processes that no wrapper sees (docker exec). The price is
// that the name of sluice's root must be known to the user: `sluice check`
// and docs/containers.md say it.
//
// Container sessions belong to root: only root and the admin group see
// them. The container keeps its own network namespace; nothing of sluice
// runs in it. Stopping or removing the container empties its cgroup: the
// session ends and its entries go. Restarting it makes a new cgroup: a new
// session. A restarted daemon attaches the running containers again (their
// resolvers move to new ports, which the datapath is told at once).

// containerName matches the cgroups Docker and containerd create: the
// container's 64 hex digit id.
var containerName = regexp.MustCompile(`^[0-9a-f]{64}$`)

// containerPoll is how often the root is scanned for new containers. Until
// a container is attached it is refused everything but loopback, so this
// bounds how long a fresh container waits for its network.
const containerPoll = 100 * time.Millisecond

// watchContainers attaches every container cgroup under the root as a
// session, now and as they appear, until the daemon stops.
func (s *Server) watchContainers() {
	t := time.NewTicker(containerPoll)
	defer t.Stop()
	failed := map[string]time.Time{}
	for {
		s.attachContainers(failed)
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

func (s *Server) attachContainers(failed map[string]time.Time) {
	entries, err := os.ReadDir(s.e.Root().Path())
	if err != nil {
		return
	}
	for _, de := range entries {
		name := de.Name()
		if de.IsDir() && s.isAdoptedName(name) {
			s.reattachAdoptedOnce(name, failed) // adopt_linux.go
			continue
		}
		if !de.IsDir() || !containerName.MatchString(name) {
			continue
		}
		s.mu.Lock()
		_, known := s.sessions[name]
		s.mu.Unlock()
		if known || time.Since(failed[name]) < 5*time.Second {
			continue
		}
		if err := s.attachContainer(name); err != nil {
			failed[name] = time.Now()
			if err != errNoProcess {
				s.emit(audit.Event{Type: audit.SessionRefused, Session: name,
					Message: fmt.Sprintf("container %s not confined by its policy yet (its traffic stays refused): %v", name[:12], err)})
			}
			continue
		}
		delete(failed, name)
	}
}

var errNoProcess = fmt.Errorf("no process yet")

// attachContainer makes the container cgroup name a session.
func (s *Server) attachContainer(name string) error {
	netns, pid, err := containerNetNS(s.e.Root().Path() + "/" + name)
	if err != nil {
		return err
	}
	defer netns.Close()
	ss := s.attached(api.SessionInfo{Name: name, UID: 0, Created: time.Now().UTC(), Argv: []string{"container " + name[:12]}}, nil, nil)
	es, err := s.e.AttachSession(name, enforcer.Options{Policy: s.machine.Load(), DNS: ss.DNSOptions(),
		Proxy: &enforcer.ProxyOptions{OnEvent: ss.ProxyEvent}, SharedEvents: true, NetNS: netns})
	if err != nil {
		return err
	}
	ss.Bind(es)
	s.register(ss)
	// The process the namespace came from stands for the container.
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if exe == "" {
		exe = "?"
	}
	s.emit(audit.Event{Type: audit.SessionStarted, Session: name, UID: &ss.Info.UID, Entries: sessions.PolicyStrings(es),
		PID: uint32(pid), Exe: exe,
		Message: fmt.Sprintf("container %s confined: session %s", name[:12], name)})
	go ss.Wait()
	return nil
}

// containerNetNS opens the network namespace of a process in the cgroup
// at dir. The pid is pinned with a pidfd, and checked alive after the
// namespace is opened, so a reused pid cannot hand over another
// namespace.
func containerNetNS(dir string) (*os.File, int, error) {
	b, err := os.ReadFile(dir + "/cgroup.procs")
	if err != nil {
		return nil, 0, err
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		pfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		// The pid may have been reused since cgroup.procs was read. And
		// runc's first stages join the cgroup before they enter the
		// container's namespaces: their namespace is the engine's.
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if !strings.Contains(string(cg), "/"+filepathBase(dir)+"\n") ||
			strings.HasPrefix(string(comm), "runc:[0") || strings.HasPrefix(string(comm), "runc:[1") {
			unix.Close(pfd)
			continue
		}
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		alive := unix.PidfdSendSignal(pfd, 0, nil, 0) == nil
		unix.Close(pfd)
		if err != nil || !alive {
			if ns != nil {
				ns.Close()
			}
			continue
		}
		return ns, pid, nil
	}
	return nil, 0, errNoProcess
}

func filepathBase(p string) string { return p[strings.LastIndex(p, "/")+1:] }
