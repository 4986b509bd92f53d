// SPDX-License-Identifier: Apache-2.0

package podpolicy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/allowlist"
)

// Pod is what the node agent knows of a pod when it is created (NRI's
// RunPodSandbox): nothing here is trusted beyond naming the pod, since the
// pod's author wrote its annotations and labels.
type Pod struct {
	Namespace   string
	Name        string
	UID         string
	Annotations map[string]string
	Labels      map[string]string
}

// String names the pod for people: namespace/name.
func (p Pod) String() string { return p.Namespace + "/" + p.Name }

// Choice is the decision for one pod.
type Choice struct {
	// Guarded: the pod must be confined. A guarded pod with Refused set
	// must not run at all.
	Guarded bool
	// Name is the chosen policy's name.
	Name string
	// Policy is the chosen policy, before the node's allowlist narrows it.
	Policy *allowlist.Policy
	// ByAnnotation: the pod's annotation chose it (else its namespace's
	// default).
	ByAnnotation bool
	// Rule is the guard's key that matched the namespace ("agents",
	// "ci-*").
	Rule string
	// Refused says why a guarded pod gets no policy; empty otherwise.
	Refused string
}

// Choose decides a pod's policy. A pod of an unguarded namespace is left
// alone, unless it asks for a policy with the annotation: then it is
// refused, since running it unconfined would betray what its author asked
// for and the admin has not allowed confinement there.
func (s *Set) Choose(pod Pod) Choice {
	var g *Guard
	if s != nil {
		g = s.Guard
	}
	want, annotated := pod.Annotations[Annotation]
	rule, pat, guarded := g.rule(pod.Namespace)
	if !guarded {
		if annotated {
			return Choice{Guarded: true, Refused: fmt.Sprintf("pod %s asks for policy %q (annotation %s), but namespace %s is not guarded on this node: refused rather than run unconfined",
				pod, want, Annotation, pod.Namespace)}
		}
		return Choice{}
	}
	c := Choice{Guarded: true, Rule: pat}
	switch {
	case annotated:
		if err := CheckName(want); err != nil {
			c.Refused = fmt.Sprintf("pod %s: annotation %s: %v", pod, Annotation, err)
			return c
		}
		if !slices.Contains(rule.Selectable, want) {
			allowed := "none"
			if len(rule.Selectable) > 0 {
				allowed = strings.Join(rule.Selectable, ", ")
			}
			c.Refused = fmt.Sprintf("pod %s asks for policy %q (annotation %s), which namespace rule %q does not let its pods choose (selectable: %s)",
				pod, want, Annotation, pat, allowed)
			return c
		}
		c.Name, c.ByAnnotation = want, true
	case rule.Default != "":
		c.Name = rule.Default
	default:
		c.Refused = fmt.Sprintf("pod %s is in guarded namespace %s (rule %q), which has no default policy, and it names none with annotation %s",
			pod, pod.Namespace, pat, Annotation)
		return c
	}
	p, ok := s.Policies[c.Name]
	if !ok {
		// parseGuard refuses a guard naming a missing policy; this is a
		// Set built by hand.
		c.Refused = fmt.Sprintf("pod %s: policy %q is not in the ConfigMap", pod, c.Name)
		c.Name = ""
		return c
	}
	c.Policy = p
	return c
}
