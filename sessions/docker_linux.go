// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/dockerbroker"
	"github.com/sluice-dev/sluice/enforcer"
)

// A session with Docker (api.CreateRequest.Docker) gets a socket of its
// own served by a dockerbroker.Broker, named in DOCKER_HOST. The broker
// places every container the session creates under sluice's cgroup root
// (a cgroup there with no session entry is refused all but loopback, so a
// container is confined from its first instruction) and, once the engine
// says it started, the service attaches its cgroup as a session of its
// own with the session's policy: its resolver and proxy listen in the
// container's network namespace, its denials are the session's lines.
// The container's cgroup is the root's child, beside the session's, not
// below it: the session's cgroup holds the command, and the engine's
// cgroup driver makes the container's where its parent says.
//
// When the session ends, its socket closes (cutting attached clients and
// followed logs), its containers are removed by force with their
// anonymous volumes, and their sessions end with their cgroups.

// dockerSession is a session's broker and the container sessions it
// attached.
type dockerSession struct {
	path string
	b    *dockerbroker.Broker
	// engine, workspace and listener are what it was made with
	// (DockerState), listener nil until it serves.
	engine, workspace string
	listener          net.Listener

	mu       sync.Mutex
	children map[string]*Session // by container id

	// guarded are the paths the session's sandbox hides or makes
	// read-only, known once its command started (guardedSet closed).
	guarded    []string
	guardedSet chan struct{}
}

// setGuarded gives the broker the session's hidden and read-only paths,
// once the sandbox has found them.
func (d *dockerSession) setGuarded(paths []string) {
	d.guarded = paths
	close(d.guardedSet)
}

// guardedPaths waits (a while) for setGuarded: a bind judged before the
// sandbox's paths are known is refused.
func (d *dockerSession) guardedPaths() ([]string, error) {
	select {
	case <-d.guardedSet:
		return d.guarded, nil
	case <-time.After(5 * time.Second):
		return nil, errors.New("the session's hidden and read-only paths are not known yet")
	}
}

// BrokerContainer reports whether labels are those of a container a
// Docker session of this service's root created (its broker's labels):
// its session attaches it, and no one else may, with another policy,
// even when that session is gone (a daemon restarted, a run killed).
// Until its session attaches it, and after, it stays what a cgroup under
// the root with no session is: refused all but loopback.
func (sv *Service) BrokerContainer(labels map[string]string) bool {
	_, ok := labels[dockerbroker.SessionLabel]
	return ok && labels[dockerbroker.RootLabel] == sv.e.Root().Name()
}

// dockerSocketPath is a fresh name for a session's Docker socket in the
// instance's state directory.
func dockerSocketPath(stateDir string) string {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	return filepath.Join(stateDir, "docker", hex.EncodeToString(rnd[:])+".sock")
}

// engineSocket is the engine's socket path that host names.
func engineSocket(host string) string {
	if host == "" {
		return DefaultDockerHost
	}
	return strings.TrimPrefix(host, "unix://")
}

// containerParent is the cgroup parent that puts a container under root
// for the engine's cgroup driver: the slice where systemd manages the
// root, the root's path where sluice does.
func containerParent(root *cgroups.Root) string {
	if root.Slice() != "" {
		return root.Slice()
	}
	return "/" + root.Name()
}

// startDocker serves ss's Docker socket at path.
func (sv *Service) startDocker(ss *Session, plan *Plan, path string) error {
	// The session's user must traverse the state directory to its socket
	// (0600, its own); the directory stays unlistable to it, and the
	// session locks below it stay root's (0700).
	if st, err := os.Stat(sv.e.StateDir()); err == nil && st.Mode().Perm()&0o011 != 0o011 {
		if err := os.Chmod(sv.e.StateDir(), st.Mode().Perm()|0o011); err != nil {
			return fmt.Errorf("the state directory: %w", err)
		}
	}
	l, err := dockerbroker.Listen(path, int(plan.Spawn.UID), int(plan.Spawn.GID))
	if err != nil {
		return err
	}
	engine := engineSocket(plan.Req.DockerHost)
	ws := plan.Req.Dir
	if ws == "" {
		if ws, err = os.Getwd(); err != nil {
			l.Close()
			os.Remove(path)
			return fmt.Errorf("the session's workspace: %w", err)
		}
	}
	if r, err := filepath.EvalSymlinks(ws); err == nil {
		ws = r
	}
	d := sv.newDockerSession(ss, path, engine, ws)
	d.listener = l
	go func() { _ = d.b.Serve(l) }()
	ss.docker = d
	go sv.removeLeftovers(ss, d.b)
	return nil
}

// newDockerSession is ss's broker for the engine at engine, serving the
// socket path, with the workspace ws.
func (sv *Service) newDockerSession(ss *Session, path, engine, ws string) *dockerSession {
	d := &dockerSession{path: path, engine: engine, workspace: ws, children: map[string]*Session{}, guardedSet: make(chan struct{})}
	d.b = dockerbroker.New(dockerbroker.Config{
		Scope: dockerbroker.Scope{Session: ss.Name(), Root: sv.e.Root().Name(), Workspace: ws, CgroupParent: containerParent(sv.e.Root()),
			Resolve: filepath.EvalSymlinks, Sockets: []string{engine, path}, Guarded: d.guardedPaths},
		Engine:        engine,
		AllowRegistry: func(host string) error { return judgeRegistry(ss.es.Policy(), host) },
		AllowFetch:    func(hostport string) error { return judgeFetch(ss.es.Policy(), hostport) },
		OnRefuse: func(r *dockerbroker.Refusal) {
			ss.Deliver(audit.Event{Type: audit.DockerRefused, Session: ss.Name(), Reason: r.Why, Message: "docker: " + r.Line()})
		},
		OnStart: func(id string) error { return sv.attachContainer(ss, d, id) },
		OnBuild: func(container string) (string, func(), error) { return sv.buildParent(ss, d, container) },
	})
	return d
}

// DockerState is what a session's Docker socket needs to be served again
// by the next daemon (ResumeDocker): the socket, the engine, the
// workspace and the paths its binds may not open.
type DockerState struct {
	Socket    string   `json:"socket"`
	Engine    string   `json:"engine"`
	Workspace string   `json:"workspace"`
	Guarded   []string `json:"guarded,omitempty"`
}

// Docker is the session's Docker socket's state, nil when it has none.
func (ss *Session) Docker() *DockerState {
	d := ss.docker
	if d == nil {
		return nil
	}
	st := &DockerState{Socket: d.path, Engine: d.engine, Workspace: d.workspace}
	select {
	case <-d.guardedSet:
		st.Guarded = slices.Clone(d.guarded)
	default:
	}
	return st
}

// keptListener is the descriptor of ss's Docker socket for the session's
// supervisor to hold across daemon restarts (enforcer.CommandSpec.Kept),
// nil when it has none.
func (ss *Session) keptListener() (*os.File, error) {
	if ss.docker == nil || ss.docker.listener == nil {
		return nil, nil
	}
	ul, ok := ss.docker.listener.(*net.UnixListener)
	if !ok {
		return nil, fmt.Errorf("docker socket: a %T, not a unix listener", ss.docker.listener)
	}
	return ul.File()
}

// ResumeDocker serves again the Docker socket of ss, a session a
// restarted daemon re-adopted, as st says: the listening socket is the
// one its supervisor (pidfd) kept (so the name the session knows, and
// the bind mounts of it, stay the same socket, and clients that
// connected meanwhile are served now), the broker takes back what the
// session made on the engine by its labels, and its running containers
// are attached again as its children. Until then they stayed what they
// were, confined by the entries the datapath kept.
func (sv *Service) ResumeDocker(ss *Session, st DockerState, pidfd int) error {
	if !sv.cfg.Docker {
		return errors.New("docker: this service gives no Docker sockets")
	}
	fd, err := unix.PidfdGetfd(pidfd, enforcer.KeptFD, 0)
	if err != nil {
		return fmt.Errorf("docker: the socket the session's supervisor kept: %w", err)
	}
	f := os.NewFile(uintptr(fd), st.Socket)
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("docker: the socket the session's supervisor kept: %w", err)
	}
	ul, ok := l.(*net.UnixListener)
	if !ok || ul.Addr().String() != st.Socket {
		l.Close()
		return fmt.Errorf("docker: the supervisor's descriptor %d is not the session's socket %s (%v)", enforcer.KeptFD, st.Socket, l.Addr())
	}
	ul.SetUnlinkOnClose(false)
	d := sv.newDockerSession(ss, st.Socket, st.Engine, st.Workspace)
	d.listener = l
	d.setGuarded(st.Guarded)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	running, err := d.b.Resume(ctx)
	if err != nil && running == nil {
		l.Close()
		return fmt.Errorf("docker: %w", err)
	}
	ss.docker = d
	go func() { _ = d.b.Serve(l) }()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range running {
		if err := sv.attachContainer(ss, d, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeLeftovers removes what earlier sessions of this root left on the
// engine when they were killed (kill -9 of sluice run: nothing could end
// them), reporting each on the session's terminal.
func (sv *Service) removeLeftovers(ss *Session, b *dockerbroker.Broker) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gone, err := b.RemoveLeftovers(ctx, sv.e.SessionOwned)
	if ss.h.Note == nil {
		return
	}
	for _, l := range gone {
		ss.h.Note(fmt.Sprintf("docker: removed %s %.12s, left by session %s, which was killed", l.Kind, l.ID, l.Session))
	}
	if err != nil {
		ss.h.Note("docker: removing what killed sessions left: " + err.Error())
	}
}

// buildParent is the cgroup parent of one build of ss: an alias cgroup
// under sluice's root whose step containers are ss's (or, for steps that
// share the network namespace of ss's container, that container's
// session's), removed with everything still below it once the build ends.
func (sv *Service) buildParent(ss *Session, d *dockerSession, container string) (string, func(), error) {
	target := ss.es
	if container != "" {
		d.mu.Lock()
		c := d.children[container]
		d.mu.Unlock()
		if c == nil || c.es == nil {
			return "", nil, fmt.Errorf("container %.12s has no session (it is not running): its network cannot be a build's", container)
		}
		target = c.es
	}
	a, err := sv.e.NewAlias(target)
	if err != nil {
		return "", nil, err
	}
	done := func() {
		if err := a.Close(10 * time.Second); err != nil && ss.h.Note != nil {
			ss.h.Note("docker: after a build: " + err.Error())
		}
	}
	return a.Parent(), done, nil
}

// judgeRegistry judges the registry host of a pull or push (host,
// host:port or [v6]:port, as dockerbroker.RegistryHost gives it) by the
// session's policy, as the engine's connection to it would be judged:
// the address or name must be allowed, and so must the TCP port the
// engine dials (the one named, else 443) under the entry's port rules.
// nil: allowed; the error is the refusal's reason.
//
// Unlike the datapath, loopback is not allowed without an entry: the
// engine dials it, not the session, and follows whatever redirects the
// registry answers unjudged, and a loopback registry may be the
// session's own listener. A registry named without a port on loopback
// is also dialled on port 80: the engine falls back to plain HTTP for
// 127.0.0.0/8, its default insecure registries.
func judgeRegistry(p *allowlist.Policy, host string) error {
	return judgeEngineDial(p, "the registry ", host)
}

// judgeFetch judges host:port, a URL the engine fetches for a build (an
// ADD source), as judgeRegistry does a registry.
func judgeFetch(p *allowlist.Policy, hostport string) error {
	return judgeEngineDial(p, "", hostport)
}

// judgeEngineDial is judgeRegistry; what names the host in its messages.
func judgeEngineDial(p *allowlist.Policy, what, host string) error {
	h, ports, err := registryPorts(host)
	if err != nil {
		return fmt.Errorf("%s%s: %w", what, host, err)
	}
	notListed := fmt.Errorf("%s%s is not in the session's allowlist", what, host)
	var rule allowlist.PortRule
	if a, err := netip.ParseAddr(h); err == nil {
		r, ok := p.AddrPorts(a)
		if !ok {
			return notListed
		}
		rule = r
		if ports == nil && allowlist.IsLoopback(a) {
			ports = []uint16{443, 80}
		}
	} else {
		if _, ok := p.MatchName(h); !ok {
			return notListed
		}
		rule, _ = p.NamePorts(h)
		if ports == nil && allowlist.IsLoopbackName(h) {
			ports = []uint16{443, 80}
		}
	}
	if ports == nil {
		ports = []uint16{443}
	}
	for _, port := range ports {
		if !rule.Ports.Allows(allowlist.ProtoTCP, port) {
			return fmt.Errorf("%s%s: %s", what, host, rule.Explain(allowlist.ProtoTCP, port))
		}
	}
	return nil
}

// registryPorts splits a registry host into its host (brackets of an
// IPv6 address removed) and the port it names, nil when it names none.
func registryPorts(host string) (string, []uint16, error) {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		// No port: the whole is the host.
		return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), nil, nil
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return "", nil, fmt.Errorf("%q is not a port", port)
	}
	return h, []uint16{uint16(n)}, nil
}

// attachContainer makes the started container id a session with ss's
// policy, reporting to ss.
func (sv *Service) attachContainer(ss *Session, d *dockerSession, id string) error {
	root := sv.e.Root().Path()
	name := ""
	deadline := time.Now().Add(5 * time.Second)
	for name == "" {
		for _, n := range []string{id, "docker-" + id + ".scope"} {
			if st, err := os.Stat(filepath.Join(root, n)); err == nil && st.IsDir() {
				name = n
			}
		}
		if name == "" {
			if time.Now().After(deadline) {
				return fmt.Errorf("container %.12s: its cgroup is not under sluice's root %s (its traffic stays refused)", id, root)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	d.mu.Lock()
	old := d.children[id]
	d.mu.Unlock()
	if old != nil {
		// A restart: the old cgroup's session ends as it empties.
		select {
		case <-old.Done():
		case <-time.After(5 * time.Second):
			return fmt.Errorf("container %.12s: its earlier session has not ended", id)
		}
	}
	netns, err := containerNetNS(filepath.Join(root, name))
	if errors.Is(err, errExited) {
		// It ran and exited before it could be attached (`docker run
		// --rm alpine echo`): under the root with no session, it had
		// loopback only, and a new start attaches it again.
		return nil
	}
	if err != nil {
		return fmt.Errorf("container %.12s: %w", id, err)
	}
	defer netns.Close()
	child := sv.Attached(api.SessionInfo{UID: ss.Info.UID, Created: time.Now().UTC(), Argv: []string{"container " + id[:12]},
		Parent: ss.Name(), Audit: ss.Info.Audit}, ss.Requested, nil, Hooks{Sink: childSink{ss.h.Sink}, Note: ss.h.Note})
	es, err := sv.e.AttachSession(name, enforcer.Options{Policy: ss.es.Policy(), Audit: ss.Info.Audit, DNS: child.DNSOptions(),
		Verify: &enforcer.VerifyOptions{OnRefuse: child.NameEvent}, Proxy: &enforcer.ProxyOptions{OnEvent: child.ProxyEvent},
		SharedEvents: sv.cfg.SharedEvents, NetNS: netns})
	if err != nil {
		return fmt.Errorf("container %.12s: %w", id, err)
	}
	child.Bind(es)
	if !sv.cfg.SharedEvents {
		child.readEvents()
	}
	d.mu.Lock()
	d.children[id] = child
	d.mu.Unlock()
	go child.Wait()
	return nil
}

// stopDocker closes ss's Docker socket, removes its containers, then its
// networks and volumes, and waits (bounded, all of it) for the
// containers' sessions to end.
func (d *dockerSession) stop() error {
	_ = d.b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := d.b.RemoveAll(ctx)
	d.mu.Lock()
	children := make([]*Session, 0, len(d.children))
	for _, c := range d.children {
		children = append(children, c)
	}
	d.mu.Unlock()
	for _, c := range children {
		select {
		case <-c.Done():
		case <-ctx.Done():
			err = errors.Join(err, fmt.Errorf("container session %s did not end", c.Name()))
		}
	}
	if rerr := os.Remove(d.path); rerr != nil && !os.IsNotExist(rerr) {
		err = errors.Join(err, rerr)
	}
	return err
}

// childSink passes a container session's denials to its session's sink;
// its start and end are the broker's business, not the front door's.
type childSink struct{ parent Sink }

func (c childSink) Publish(e audit.Event) {
	if e.Type == audit.SessionStarted || e.Type == audit.SessionEnded {
		return
	}
	c.parent.Publish(e)
}

// containerNetNS opens the network namespace of a process of the
// container cgroup dir, waiting a while for one that has entered the
// container's namespaces (runc's first stages join the cgroup before).
func containerNetNS(dir string) (*os.File, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if f := netNSOfProcs(dir); f != nil {
			return f, nil
		}
		// Once the engine said it started, an empty (or removed) cgroup
		// is a container that has already exited.
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err != nil || len(strings.TrimSpace(string(b))) == 0 {
			return nil, errExited
		}
		if time.Now().After(deadline) {
			return nil, errors.New("no process of the container in its network namespace")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// errExited: the container's cgroup has no process left.
var errExited = errors.New("the container has exited")

func netNSOfProcs(dir string) *os.File {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	self, _ := os.Readlink("/proc/thread-self/ns/net")
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		pfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		ns, nerr := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		link, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		// Still that process (not a reused pid), past runc's first stages.
		alive := unix.PidfdSendSignal(pfd, 0, nil, 0) == nil
		unix.Close(pfd)
		if nerr != nil {
			continue
		}
		if !alive || link == self || strings.HasPrefix(string(comm), "runc:[0") || strings.HasPrefix(string(comm), "runc:[1") ||
			!strings.Contains(string(cg), "/"+filepath.Base(dir)+"\n") {
			ns.Close()
			continue
		}
		return ns
	}
	return nil
}
