// SPDX-License-Identifier: Apache-2.0

package nriplugin

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"

	"github.com/sluice-dev/sluice/podpolicy"
)

// Pods is what the plugin asks of the node agent.
type Pods interface {
	// ConfinePod confines the pod (a no-op for a pod that needs nothing
	// or already is); an error means the pod must not run.
	ConfinePod(pod podpolicy.Pod, cgroupParent string) error
	// AdoptPod is ConfinePod for a pod that already runs and so cannot
	// be refused any more: one that gets no policy is held to loopback
	// only; the error reports it.
	AdoptPod(pod podpolicy.Pod, cgroupParent string) error
	// PodEnded tells of a pod the runtime removed.
	PodEnded(cgroupParent string)
}

// Options configure Run.
type Options struct {
	// Socket is the runtime's NRI socket (/var/run/nri/nri.sock).
	Socket string
	// Name and Index register the plugin: the index orders plugins, and
	// a low one puts sluice's refusal before other plugins' adjustments.
	Name, Index string
	// Logf reports what an operator must hear of (nil: nothing).
	Logf func(format string, args ...any)
	// Retry is the pause before reconnecting after the runtime went away
	// (a containerd restart); zero: one second.
	Retry time.Duration
	// OnConnect is called each time the plugin is registered (tests).
	OnConnect func()
}

type plugin struct {
	pods Pods
	o    Options
}

// Run serves as the runtime's NRI plugin until ctx is done, connecting
// again whenever the runtime restarts; each connection begins with the
// runtime's Synchronize, which hands over every pod that already runs, so
// a restarted agent takes up its pods again.
func Run(ctx context.Context, pods Pods, o Options) error {
	if o.Name == "" {
		o.Name = "sluice"
	}
	if o.Index == "" {
		o.Index = "05"
	}
	if o.Retry == 0 {
		o.Retry = time.Second
	}
	p := &plugin{pods: pods, o: o}
	for {
		closed := make(chan struct{})
		st, err := stub.New(p, stub.WithPluginName(o.Name), stub.WithPluginIdx(o.Index), stub.WithSocketPath(o.Socket),
			stub.WithOnClose(func() { close(closed) }))
		if err != nil {
			return fmt.Errorf("nri plugin: %w", err)
		}
		if err := st.Start(ctx); err != nil {
			p.logf("nri: cannot register with the runtime at %s (retrying): %v", o.Socket, err)
		} else {
			if o.OnConnect != nil {
				o.OnConnect()
			}
			select {
			case <-closed:
				p.logf("nri: the runtime closed the connection; reconnecting")
			case <-ctx.Done():
			}
			st.Stop()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Retry):
		}
	}
}

func (p *plugin) logf(format string, args ...any) {
	if p.o.Logf != nil {
		p.o.Logf(format, args...)
	}
}

// podOf is what the agent decides on: nothing of the pod beyond its
// identity and its authors' annotations and labels.
func podOf(pod *api.PodSandbox) podpolicy.Pod {
	return podpolicy.Pod{Namespace: pod.GetNamespace(), Name: pod.GetName(), UID: pod.GetUid(),
		Annotations: pod.GetAnnotations(), Labels: pod.GetLabels()}
}

// Configure subscribes to the events the agent needs.
func (p *plugin) Configure(_ context.Context, _, runtime, version string) (api.EventMask, error) {
	p.logf("nri: registered with %s %s", runtime, version)
	return api.MustParseEventMask("RunPodSandbox", "CreateContainer", "RemovePodSandbox"), nil
}

// Synchronize confines every running pod (an agent that just started); a
// guarded one that gets no policy is held to loopback only.
func (p *plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, _ []*api.Container) ([]*api.ContainerUpdate, error) {
	for _, pod := range pods {
		if err := p.pods.AdoptPod(podOf(pod), pod.GetLinux().GetCgroupParent()); err != nil {
			p.logf("nri: running pod %s/%s: %v", pod.GetNamespace(), pod.GetName(), err)
		}
	}
	// Until here a running pod's DNS may go unanswered (its last agent's
	// resolver is gone; the kernel refuses, nothing leaks): the line tells
	// an operator, and the tests, that the node is whole again.
	p.logf("nri: synchronized with %d running pods", len(pods))
	return nil, nil
}

// RunPodSandbox confines a new pod as soon as its sandbox runs. An error
// here cannot stop the pod (an event, not a request): CreateContainer
// refuses its containers instead.
func (p *plugin) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	if err := p.pods.ConfinePod(podOf(pod), pod.GetLinux().GetCgroupParent()); err != nil {
		p.logf("nri: pod %s/%s: %v", pod.GetNamespace(), pod.GetName(), err)
	}
	return nil
}

// CreateContainer refuses a container of a pod that is guarded and not
// confined, confining it first where it can.
func (p *plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if err := p.pods.ConfinePod(podOf(pod), pod.GetLinux().GetCgroupParent()); err != nil {
		return nil, nil, fmt.Errorf("container %s of pod %s/%s: %w", ctr.GetName(), pod.GetNamespace(), pod.GetName(), err)
	}
	return nil, nil, nil
}

// RemovePodSandbox ends the pod's session.
func (p *plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.pods.PodEnded(pod.GetLinux().GetCgroupParent())
	return nil
}
