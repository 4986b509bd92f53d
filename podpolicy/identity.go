// SPDX-License-Identifier: Apache-2.0

package podpolicy

import (
	"maps"
	"slices"
	"strings"
)

// The job identity the CI systems' Kubernetes runners put on a job's pod.
// GitLab's Kubernetes executor annotates the build pod with the job
// (job.runner.gitlab.com/id, /url, /sha, /ref, /name...) and the project
// (project.runner.gitlab.com/id...); GitHub's Actions Runner Controller
// labels its runner pods with the scale set and its scope
// (actions.github.com/scale-set-name, /scale-set-namespace, /organization,
// /repository...). Prefixes, not fixed keys: both projects add keys over
// time, and every one of them names the job.
var (
	identityAnnotations = []string{"job.runner.gitlab.com/", "project.runner.gitlab.com/"}
	identityLabels      = []string{"actions.github.com/"}
)

// maxIdentityValue bounds one value carried into audit events and
// metrics: the pod's author chose it.
const maxIdentityValue = 256

// Identity returns the pod's CI job identity, key -> value, from the
// annotations and labels above, plus the pod's namespace/name and uid. The
// values are the pod's own claims, for people reading the audit log; no
// decision is made on them.
func (p Pod) Identity() map[string]string {
	out := map[string]string{"pod": p.String()}
	if p.UID != "" {
		out["pod_uid"] = p.UID
	}
	take := func(m map[string]string, prefixes []string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			for _, pre := range prefixes {
				if strings.HasPrefix(k, pre) && len(k) > len(pre) {
					out[k] = clip(m[k])
				}
			}
		}
	}
	take(p.Annotations, identityAnnotations)
	take(p.Labels, identityLabels)
	return out
}

// CI names the CI system whose runner made the pod, "gitlab" or "arc",
// or "" for any other pod: a metric label with a bounded set of values,
// where the job's own id (unbounded) goes to the audit log only.
func (p Pod) CI() string {
	for k := range p.Annotations {
		if strings.HasPrefix(k, "job.runner.gitlab.com/") {
			return "gitlab"
		}
	}
	for k := range p.Labels {
		if strings.HasPrefix(k, "actions.github.com/") {
			return "arc"
		}
	}
	return ""
}

func clip(s string) string {
	if len(s) > maxIdentityValue {
		return s[:maxIdentityValue]
	}
	return s
}
