// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/containers"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/internal/atomicfile"
	"github.com/sluice-dev/sluice/podpolicy"
	"github.com/sluice-dev/sluice/sessions"
)

// Pods as sessions (`sluice node`).
//
// On a Kubernetes node the kubelet owns the cgroups: a pod's lives where
// the kubelet put it (/kubepods/... or kubepods.slice/...), and nothing is
// moved under sluice's root. The node agent's NRI plugin (package
// nriplugin) hands each pod to ConfinePod as the runtime creates it and
// again before each of its containers: the pod's policy is chosen from the
// admin's ConfigMap (package podpolicy), narrowed to the node's allowlist,
// and the datapath is attached at the pod's own cgroup
// (enforcer.AttachPod). A guarded pod that gets no policy is refused:
// ConfinePod's error makes the runtime refuse to create its containers.
// The session ends when the pod's cgroup empties (its sandbox stopped).
// Every decision goes to the audit log with the pod's CI job identity, and
// to the pod metrics.

// podState is the daemon's state for pod sessions.
type podState struct {
	mu  sync.Mutex
	set *podpolicy.Set // the last good reading of Config.PodPolicies
	// byName are the live pod sessions and their pods, by session name
	// (the pod cgroup's name).
	byName map[string]podEntry
	// seen are the pods the runtime told of and has not removed, guarded
	// or not, by pod cgroup: a reload that guards a namespace, or narrows
	// it to nothing, takes up those of its pods that already run.
	seen map[string]seenPod
	// attachMu serialises attaching: the NRI plugin's RunPodSandbox and
	// CreateContainer for one pod may race.
	attachMu sync.Mutex
	started  *prometheus.CounterVec
	refused  *prometheus.CounterVec
}

type seenPod struct {
	pod    podpolicy.Pod
	parent string
}

type podEntry struct {
	pod    podpolicy.Pod
	choice podpolicy.Choice
	ss     *session
}

// ErrPodRefused wraps the reason a guarded pod gets no policy.
var ErrPodRefused = errors.New("refused by sluice")

// startPods reads the pod policies (a node agent only). A malformed
// directory at start is an error: the agent must not run guarding nothing.
func (s *Server) startPods() error {
	s.pods.byName = map[string]podEntry{}
	s.pods.seen = map[string]seenPod{}
	s.pods.started = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_pod_sessions_total", Help: "Pods confined on this node, by namespace, policy and CI system (gitlab, arc, or empty).",
	}, []string{"namespace", "policy", "ci"})
	s.pods.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_pods_refused_total", Help: "Pods of guarded namespaces refused (no policy applies), by namespace and CI system.",
	}, []string{"namespace", "ci"})
	s.metrics.reg.MustRegister(s.pods.started, s.pods.refused)
	set, err := podpolicy.Load(s.cfg.PodPolicies)
	if err != nil {
		return fmt.Errorf("pod policies %s: %w", s.cfg.PodPolicies, err)
	}
	s.pods.set = set
	if err := s.writeGuard(set); err != nil {
		return err
	}
	if err := s.e.ReclaimPods(); err != nil {
		s.logf("pods: reclaim: %v", err)
	}
	s.emit(audit.Event{Type: audit.PolicyChanged, Message: fmt.Sprintf("pod policies loaded from %s: %s", s.cfg.PodPolicies, describeSet(set))})
	return nil
}

func describeSet(set *podpolicy.Set) string {
	guarded := 0
	if set.Guard != nil {
		guarded = len(set.Guard.Namespaces)
	}
	names := set.Names()
	if len(names) == 0 {
		names = []string{"none"}
	}
	return fmt.Sprintf("policies %s; %d guarded namespace rules", strings.Join(names, ", "), guarded)
}

// writeGuard leaves the guard in force where the fail-closed hook reads
// it (Config.PodGuardFile).
func (s *Server) writeGuard(set *podpolicy.Set) error {
	b, err := set.GuardJSON()
	if err != nil {
		return fmt.Errorf("pods: the hook's guard: %w", err)
	}
	p := s.cfg.PodGuardFile
	if p == "" {
		p = podpolicy.DefaultGuardFile
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("pods: the hook's guard: %w", err)
	}
	if err := atomicfile.Write(p, b, 0o644, nil); err != nil {
		return fmt.Errorf("pods: the hook's guard: %w", err)
	}
	return nil
}

// PodDecision is the choice for pod under the policies now in force.
func (s *Server) PodDecision(pod podpolicy.Pod) podpolicy.Choice {
	s.pods.mu.Lock()
	set := s.pods.set
	s.pods.mu.Unlock()
	return set.Choose(pod)
}

// ConfinePod makes the pod, whose cgroup parent is cgroupParent (as the
// kubelet gave it to the runtime), a session with its policy, unless it
// already is one or its namespace is not guarded. An error means the pod
// must not run: it is refused (ErrPodRefused) or could not be confined.
func (s *Server) ConfinePod(pod podpolicy.Pod, cgroupParent string) error {
	return s.confinePod(pod, cgroupParent, false)
}

// AdoptPod is ConfinePod for a pod that already runs (the runtime's
// Synchronize at the agent's start, or a reload that guards its
// namespace): one the policies refuse cannot be stopped from here, so it
// is held to loopback only, reported, and its new containers are refused.
func (s *Server) AdoptPod(pod podpolicy.Pod, cgroupParent string) error {
	return s.confinePod(pod, cgroupParent, true)
}

func (s *Server) confinePod(pod podpolicy.Pod, cgroupParent string, running bool) error {
	rel, relErr := containers.PodCgroup(cgroupParent)
	if relErr == nil {
		s.pods.mu.Lock()
		s.pods.seen[rel] = seenPod{pod: pod, parent: cgroupParent}
		s.pods.mu.Unlock()
	}
	choice := s.PodDecision(pod)
	if !choice.Guarded {
		return nil
	}
	if relErr != nil {
		return s.podRefused(pod, "", fmt.Sprintf("pod %s: %v", pod, relErr))
	}
	name := filepath.Base(rel)
	s.pods.attachMu.Lock()
	defer s.pods.attachMu.Unlock()
	s.pods.mu.Lock()
	e, known := s.pods.byName[name]
	s.pods.mu.Unlock()
	if known {
		if e.choice.Refused != "" {
			return s.podRefused(pod, name, fmt.Sprintf("%s (the pod is held to loopback only)", e.choice.Refused))
		}
		return nil
	}
	if choice.Refused != "" && !running {
		return s.podRefused(pod, name, choice.Refused)
	}
	if choice.Refused != "" {
		held := choice
		held.Name, held.Policy = "(refused)", loopbackOnly()
		if err := s.attachPod(pod, held, rel); err != nil {
			return s.podRefused(pod, name, fmt.Sprintf("running pod %s refused (%s) and not held: %v", pod, choice.Refused, err))
		}
		return s.podRefused(pod, name, fmt.Sprintf("running pod %s refused (%s): held to loopback only", pod, choice.Refused))
	}
	if err := s.attachPod(pod, choice, rel); err != nil {
		return s.podRefused(pod, name, fmt.Sprintf("pod %s not confined: %v", pod, err))
	}
	return nil
}

// podRefused reports a refused pod and returns the error the runtime
// passes on to the kubelet (the pod's events show it).
func (s *Server) podRefused(pod podpolicy.Pod, session, msg string) error {
	root := uint32(0)
	s.pods.refused.WithLabelValues(pod.Namespace, pod.CI()).Inc()
	s.emit(audit.Event{Type: audit.SessionRefused, Session: session, Actor: &root, Reason: "pod policy", Message: msg, Job: pod.Identity()})
	return fmt.Errorf("%w: %s", ErrPodRefused, msg)
}

func (s *Server) attachPod(pod podpolicy.Pod, choice podpolicy.Choice, rel string) error {
	mount, err := cgroups.Mount()
	if err != nil {
		return err
	}
	netns, pid, err := podNetNS(filepath.Join(mount, rel))
	if err != nil {
		return fmt.Errorf("the pod's network namespace: %w", err)
	}
	defer netns.Close()
	name := filepath.Base(rel)
	ss := s.attached(api.SessionInfo{Name: name, UID: 0, Created: time.Now().UTC(), Argv: []string{"pod " + pod.String()},
		PolicyName: choice.Name}, choice.Policy, nil)
	s.ctr.applyMu.Lock()
	es, err := s.e.AttachPod(rel, enforcer.Options{Policy: sessions.Intersect(choice.Policy, s.machine.Load()), DNS: ss.DNSOptions(),
		Verify: &enforcer.VerifyOptions{OnRefuse: ss.NameEvent}, Proxy: &enforcer.ProxyOptions{OnEvent: ss.ProxyEvent}, SharedEvents: true, NetNS: netns})
	s.ctr.applyMu.Unlock()
	if err != nil {
		ss.Forget()
		return err
	}
	ss.Bind(es)
	s.register(ss)
	s.pods.mu.Lock()
	s.pods.byName[name] = podEntry{pod: pod, choice: choice, ss: ss}
	s.pods.mu.Unlock()
	s.pods.started.WithLabelValues(pod.Namespace, choice.Name, pod.CI()).Inc()
	how := "its namespace's default"
	switch {
	case choice.Refused != "":
		how = "refused, held to loopback only: " + choice.Refused
	case choice.ByAnnotation:
		how = "annotation " + podpolicy.Annotation
	}
	s.emit(audit.Event{Type: audit.SessionStarted, Session: name, UID: &ss.Info.UID, Entries: sessions.PolicyStrings(es), PID: uint32(pid),
		Job: pod.Identity(), Message: fmt.Sprintf("pod %s confined: session %s, policy %s (%s, rule %q)", pod, name, choice.Name, how, choice.Rule)})
	go func() {
		ss.Wait()
		s.pods.mu.Lock()
		if e, ok := s.pods.byName[name]; ok && e.ss == ss {
			delete(s.pods.byName, name)
		}
		s.pods.mu.Unlock()
	}()
	return nil
}

// podNetNS opens the network namespace of a process of the pod (its
// sandbox's pause process, in a container cgroup below the pod's).
func podNetNS(dir string) (*os.File, int, error) {
	if ns, pid, err := containerNetNS(dir); err == nil {
		return ns, pid, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	for _, de := range ents {
		if !de.IsDir() {
			continue
		}
		if ns, pid, err := containerNetNS(filepath.Join(dir, de.Name())); err == nil {
			return ns, pid, nil
		}
	}
	return nil, 0, errNoProcess
}

// PodEnded closes a pod's session when the runtime removes the pod (the
// cgroup's emptying usually ended it already).
func (s *Server) PodEnded(cgroupParent string) {
	rel, err := containers.PodCgroup(cgroupParent)
	if err != nil {
		return
	}
	s.pods.mu.Lock()
	e, ok := s.pods.byName[filepath.Base(rel)]
	delete(s.pods.byName, filepath.Base(rel))
	delete(s.pods.seen, rel)
	s.pods.mu.Unlock()
	if ok {
		_ = e.ss.Enforced().Close()
	}
}

// reloadPods applies a change of the policy directory: each pod session
// is narrowed to its new choice at once; a pod whose choice is now a
// refusal keeps running with loopback only and is reported. A malformed
// directory changes nothing and is reported once per change.
func (s *Server) reloadPods(lastErr *string) {
	set, err := podpolicy.Load(s.cfg.PodPolicies)
	if err != nil {
		if err.Error() != *lastErr {
			*lastErr = err.Error()
			s.metrics.policy.WithLabelValues("invalid").Inc()
			msg := fmt.Sprintf("pod policies %s not applied, the last good version stays in force: %v", s.cfg.PodPolicies, err)
			s.logf("%s", msg)
			s.emit(audit.Event{Type: audit.PolicyInvalid, Reason: err.Error(), Message: msg})
		}
		return
	}
	*lastErr = ""
	s.pods.mu.Lock()
	same := s.pods.set != nil && s.pods.set.Digest == set.Digest
	if !same {
		s.pods.set = set
	}
	live := make(map[string]podEntry, len(s.pods.byName))
	for name, e := range s.pods.byName {
		live[name] = e
	}
	var others []seenPod
	for rel, sp := range s.pods.seen {
		if _, ok := live[filepath.Base(rel)]; !ok {
			others = append(others, sp)
		}
	}
	s.pods.mu.Unlock()
	if same {
		return
	}
	if err := s.writeGuard(set); err != nil {
		s.logf("pods: %v", err)
	}
	s.metrics.policy.WithLabelValues("applied").Inc()
	machine := s.machine.Load()
	var notes []string
	for name, e := range live {
		c := set.Choose(e.pod)
		s.pods.mu.Lock()
		if cur, ok := s.pods.byName[name]; ok && cur.ss == e.ss {
			cur.choice = c
			if !c.Guarded {
				cur.choice.Refused = "its namespace is no longer guarded"
			}
			s.pods.byName[name] = cur
		}
		s.pods.mu.Unlock()
		var p *allowlist.Policy
		switch {
		case !c.Guarded || c.Refused != "":
			p = loopbackOnly()
			reason := c.Refused
			if !c.Guarded {
				reason = "its namespace is no longer guarded"
			}
			notes = append(notes, fmt.Sprintf("%s: loopback only (%s)", e.pod, reason))
		default:
			p = c.Policy
			notes = append(notes, fmt.Sprintf("%s: %s", e.pod, c.Name))
		}
		e.ss.Requested = p
		s.ctr.applyMu.Lock()
		if err := e.ss.Enforced().SetPolicy(sessions.Intersect(p, machine)); err != nil {
			notes = append(notes, fmt.Sprintf("%s: error: %v", e.pod, err))
		}
		s.ctr.applyMu.Unlock()
		if r := e.ss.Enforced().Resolver(); r != nil {
			r.Prune()
		}
	}
	// Pods that run unconfined: those of a namespace the reload guards
	// are taken up now, not at their next container.
	for _, sp := range others {
		if err := s.AdoptPod(sp.pod, sp.parent); err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", sp.pod, err))
		} else if set.Choose(sp.pod).Guarded {
			notes = append(notes, fmt.Sprintf("%s: newly guarded, confined", sp.pod))
		}
	}
	msg := fmt.Sprintf("pod policies reloaded from %s: %s; applied to %d pod sessions", s.cfg.PodPolicies, describeSet(set), len(live))
	if len(notes) > 0 {
		msg += " (" + strings.Join(notes, "; ") + ")"
	}
	s.logf("%s", msg)
	s.emit(audit.Event{Type: audit.PolicyChanged, Message: msg})
}
