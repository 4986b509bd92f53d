// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/containers"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/sessions"
)

// Whole containers as sessions.
//
// `docker run --cgroup-parent=<sluice root> ...` makes the engine create
// the container's cgroup as a child of sluice's cgroup root, where the
// datapath is attached. The root is the cgroup /sluice (or
// /$SLUICE_INSTANCE) where sluice manages cgroups itself, and the slice
// sluice.slice where systemd does: there Docker's systemd cgroup driver
// takes --cgroup-parent=sluice.slice and makes sluice.slice/docker-<id>.scope
// (containerd cri-containerd-<id>.scope, podman libpod-<id>.scope; package
// containers knows the names). Every process of the container lives
// there: its entrypoint, `docker exec` shells, an IDE's server,
// postStartCommand. Until the daemon attaches the cgroup as a session, the
// datapath refuses all of its traffic but loopback (a cgroup under the
// root that is no session is refused, fail closed), so the container is
// confined from its first instruction; within moments the daemon gives it
// its policy (containerpolicy_linux.go), and starts the session's resolver
// and proxy on the container's own loopback (its network namespace, found
// through one of its processes).
//
// Why --cgroup-parent and not an OCI hook or a wrapper command: it is one
// standard `docker run` flag (devcontainer.json "runArgs", GitLab's
// cgroup_parent), it needs no engine configuration or privileged code
// inside the container, and it covers the processes that no wrapper sees
// (docker exec). The price is that the user must give the right name for
// the host: `sluice check` prints it (docs/containers.md), and a wrong one is never silently
// unconfined (containerplace_linux.go): the other form is fenced, so the
// container fails to start, and a container labelled sluice.policy outside
// the root is frozen and reported.
//
// Container sessions belong to root: only root and the admin group see
// them. The container keeps its own network namespace; nothing of sluice
// runs in it. Stopping or removing the container empties its cgroup: the
// session ends and its entries go. Restarting it makes a new cgroup: a new
// session. A restarted daemon attaches the running containers again (their
// resolvers move to new ports, which the datapath is told at once).

// containerPoll is how often the root is scanned for new containers. Until
// a container is attached it is refused everything but loopback, so this
// bounds how long a fresh container waits for its network.
const containerPoll = 100 * time.Millisecond

// Every so many polls the policy files are checked for changes, and the
// cgroup tree for misplaced containers.
const (
	policyPolls    = 5  // 0.5 s, as the machine allowlist
	placementPolls = 10 // 1 s
)

// containerState is the daemon's state for container sessions.
type containerState struct {
	policies *containerPolicies

	// applyMu serialises narrowing sessions to a new policy: the machine
	// allowlist's (apply) and a container policy file's.
	applyMu sync.Mutex

	mu sync.Mutex
	// labels are the policy labels of container sessions, by session
	// name: the sessions a policy file's change narrows.
	labels map[string]string
	// judged are the cgroups outside the root already looked at for
	// misplacement, by path, with the cgroup's inode (a restarted
	// container's new cgroup is looked at again).
	judged map[string]uint64
}

// startContainers fences the other form of the root's name and attaches
// the running containers, before any waiting event is read, so that their
// denials while no daemon ran are told as theirs.
func (s *Server) startContainers() {
	s.ctr.labels = map[string]string{}
	s.ctr.judged = map[string]uint64{}
	s.fenceOtherForm()
	s.attachContainers(map[string]time.Time{})
	s.checkPlacement()
}

// watchContainers attaches every container cgroup under the root as a
// session, now and as they appear, until the daemon stops; it also
// applies policy file changes and looks for misplaced containers.
func (s *Server) watchContainers() {
	t := time.NewTicker(containerPoll)
	defer t.Stop()
	failed := map[string]time.Time{}
	podErr := ""
	for n := 1; ; n++ {
		s.attachContainers(failed)
		if n%policyPolls == 0 {
			s.reloadContainerPolicies()
			if s.cfg.PodPolicies != "" {
				s.reloadPods(&podErr)
			}
		}
		if n%placementPolls == 0 {
			s.checkPlacement()
		}
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
		ref, ok := containers.ParseCgroup(name)
		if !de.IsDir() || !ok {
			continue
		}
		s.mu.Lock()
		_, known := s.sessions[name]
		s.mu.Unlock()
		if known || s.svc.Lookup(name) != nil || time.Since(failed[name]) < 5*time.Second {
			continue
		}
		if err := s.attachContainer(name, ref); err != nil {
			failed[name] = time.Now()
			if err != errNoProcess && err != errBrokerOwned {
				s.containerRefused(name, "attach failed",
					fmt.Sprintf("container %s not confined by its policy yet (its traffic stays refused): %v", ref.ID[:12], err))
			}
			continue
		}
		delete(failed, name)
	}
}

var errNoProcess = fmt.Errorf("no process yet")

// errBrokerOwned: the container is a session's Docker socket's, which
// attaches it (sessions.Service.BrokerContainer).
var errBrokerOwned = fmt.Errorf("a session's Docker container")

// attachContainer makes the container cgroup name a session, with the
// policy its engine record's label selects.
func (s *Server) attachContainer(name string, ref containers.Ref) error {
	netns, pid, err := containerNetNS(s.e.Root().Path() + "/" + name)
	if err != nil {
		return err
	}
	defer netns.Close()
	rec, recErr := containers.RecordOf(pid, ref.ID)
	if recErr == nil && s.svc.BrokerContainer(rec.Labels) {
		return errBrokerOwned
	}
	choice := chooseContainerPolicy(s.ctr.policies, rec, recErr)
	short := ref.ID[:12]
	ss := s.attached(api.SessionInfo{Name: name, UID: 0, Created: time.Now().UTC(), Argv: []string{"container " + short},
		PolicyName: choice.display()}, choice.requested, nil)
	s.ctr.applyMu.Lock()
	es, err := s.e.AttachSession(name, enforcer.Options{Policy: sessions.Intersect(choice.requested, s.machine.Load()), DNS: ss.DNSOptions(), Verify: &enforcer.VerifyOptions{OnRefuse: ss.NameEvent},
		Proxy: &enforcer.ProxyOptions{OnEvent: ss.ProxyEvent}, SharedEvents: true, NetNS: netns})
	s.ctr.applyMu.Unlock()
	if err != nil {
		ss.Forget()
		return err
	}
	ss.Bind(es)
	s.addContainerSession(ss, choice)
	if choice.problem != "" {
		msg := fmt.Sprintf("container %s gets loopback only, not the machine allowlist: %s", short, choice.problem)
		s.logf("%s", msg)
		s.containerRefused(name, "container policy", msg)
	}
	// The process the namespace came from stands for the container.
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if exe == "" {
		exe = "?"
	}
	s.emit(audit.Event{Type: audit.SessionStarted, Session: name, UID: &ss.Info.UID, Entries: sessions.PolicyStrings(es),
		PID: uint32(pid), Exe: exe,
		Message: fmt.Sprintf("container %s confined: session %s, policy %s", short, name, choice.display())})
	go ss.Wait()
	return nil
}

// containerRefused is the audit line of a refusal about a container. The
// actor is root: container sessions are root's, started by the engine.
func (s *Server) containerRefused(session, reason, msg string) {
	root := uint32(0)
	s.emit(audit.Event{Type: audit.SessionRefused, Session: session, Actor: &root, Reason: reason, Message: msg})
}

// addContainerSession registers a container session with the server and
// records its policy label. (The one call into the session registry.)
func (s *Server) addContainerSession(ss *session, choice containerChoice) {
	s.mu.Lock()
	s.sessions[ss.Info.Name] = ss
	s.mu.Unlock()
	s.ctr.mu.Lock()
	if choice.labelled && choice.problem == "" {
		s.ctr.labels[ss.Info.Name] = choice.label
	} else {
		delete(s.ctr.labels, ss.Info.Name)
	}
	s.ctr.mu.Unlock()
}

// containerSessionsWith returns the live container sessions whose label
// is name, forgetting the labels of sessions that ended.
func (s *Server) containerSessionsWith(name string) []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctr.mu.Lock()
	defer s.ctr.mu.Unlock()
	var out []*session
	for sn, label := range s.ctr.labels {
		ss, ok := s.sessions[sn]
		if !ok {
			delete(s.ctr.labels, sn)
			continue
		}
		if label == name {
			out = append(out, ss)
		}
	}
	return out
}

// reloadContainerPolicies applies the policy files that changed: their
// containers are narrowed to the new version at once; an invalid file is
// reported and its last good version stays in force.
func (s *Server) reloadContainerPolicies() {
	if s.ctr.policies == nil {
		return
	}
	for _, ch := range s.ctr.policies.changed() {
		if ch.err != nil {
			s.metrics.policy.WithLabelValues("invalid").Inc()
			msg := fmt.Sprintf("container policy %q (%s) not applied, its last good version stays in force: %v", ch.name, ch.path, ch.err)
			s.logf("%s", msg)
			s.emit(audit.Event{Type: audit.PolicyInvalid, Reason: ch.err.Error(), Message: msg})
			continue
		}
		s.ctr.applyMu.Lock()
		machine := s.machine.Load()
		var names []string
		var errs []string
		for _, ss := range s.containerSessionsWith(ch.name) {
			ss.Requested = ch.policy
			if err := ss.Enforced().SetPolicy(sessions.Intersect(ch.policy, machine)); err != nil {
				errs = append(errs, err.Error())
			}
			if r := ss.Enforced().Resolver(); r != nil {
				r.Prune()
			}
			names = append(names, ss.Info.Name)
		}
		s.ctr.applyMu.Unlock()
		s.metrics.policy.WithLabelValues("applied").Inc()
		var entries []string
		for _, e := range ch.policy.Entries() {
			entries = append(entries, e.String())
		}
		msg := fmt.Sprintf("container policy %q reloaded from %s: %d entries, applied to %d container sessions", ch.name, ch.path, ch.policy.Len(), len(names))
		if len(names) > 0 {
			msg += " (" + strings.Join(names, ", ") + ")"
		}
		if len(errs) > 0 {
			msg += "; errors: " + strings.Join(errs, "; ")
		}
		s.emit(audit.Event{Type: audit.PolicyChanged, Entries: entries, Message: msg})
	}
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
