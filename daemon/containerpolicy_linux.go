// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/containers"
)

// Policies per container.
//
// `docker run --label sluice.policy=NAME` selects the policy NAME of the
// daemon's configuration (container_policies: {"NAME": "/etc/sluice/NAME.json"},
// files in the allowlist format); the session gets its intersection with
// the machine allowlist, as a session of `sluice run` gets what it asks
// for within it. The label is read from the engine's record on the host
// (package containers), never from inside the container.
//
// What a container gets, decided by chooseContainerPolicy:
//   - no label: the machine allowlist (as before policies existed);
//   - a label naming a configured policy: that policy within the machine's;
//   - a label naming no configured policy, or a record that cannot be read:
//     loopback only, with an audit line and a log line that say why. Never
//     the machine allowlist: a label is a request to narrow, and a typo in
//     it must not widen.
//
// A policy file is read when the daemon starts (a bad one stops it, naming
// the file) and again whenever it changes (polled with the machine
// allowlist's rule): the containers using it are narrowed to the new one
// at once; a file that became invalid is reported and the last good
// version stays in force, as for the machine allowlist.

// policyNames is the alphabet of a policy name: it is a label value, a
// config key, and it appears in `sluice sessions`, audit lines and logs.
func checkPolicyName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("container policy name %q: want 1 to 64 characters", name)
	}
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && strings.ContainsRune("._-", c)) {
			return fmt.Errorf("container policy name %q: use letters, digits and . _ - (a letter or digit first)", name)
		}
	}
	return nil
}

// containerPolicies are the named policies of container_policies.
type containerPolicies struct {
	paths map[string]string // name -> file

	mu     sync.Mutex
	loaded map[string]*allowlist.Policy // the last good version of each
	stamps map[string]fileStamp
}

// loadContainerPolicies checks the configuration and reads every file;
// any error names the policy and its file.
func loadContainerPolicies(paths map[string]string) (*containerPolicies, error) {
	cp := &containerPolicies{paths: maps.Clone(paths), loaded: map[string]*allowlist.Policy{}, stamps: map[string]fileStamp{}}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(paths)) {
		path := paths[name]
		if err := checkPolicyName(name); err != nil {
			errs = append(errs, err)
			continue
		}
		if !filepath.IsAbs(path) || filepath.Clean(path) != path {
			errs = append(errs, fmt.Errorf("container policy %q: %q: want an absolute, clean path", name, path))
			continue
		}
		p, err := loadPolicyFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("container policy %q: %w", name, err))
			continue
		}
		cp.loaded[name] = p
		cp.stamps[name] = stampOf(path)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("container_policies: %w", err)
	}
	return cp, nil
}

// names are the configured policy names, sorted.
func (cp *containerPolicies) names() []string { return slices.Sorted(maps.Keys(cp.paths)) }

// policy returns the last good version of policy name.
func (cp *containerPolicies) policy(name string) (*allowlist.Policy, bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	p, ok := cp.loaded[name]
	return p, ok
}

// policyChange is a policy file that changed since it was last read.
type policyChange struct {
	name, path string
	policy     *allowlist.Policy // nil: err
	err        error
}

// changed reads the files that changed since the last call and returns
// what happened to each; a valid one becomes the policy's version.
func (cp *containerPolicies) changed() []policyChange {
	var out []policyChange
	for _, name := range cp.names() {
		path := cp.paths[name]
		st := stampOf(path)
		cp.mu.Lock()
		same := st == cp.stamps[name]
		cp.stamps[name] = st
		cp.mu.Unlock()
		if same {
			continue
		}
		p, err := loadPolicyFile(path)
		if err == nil {
			cp.mu.Lock()
			cp.loaded[name] = p
			cp.mu.Unlock()
		}
		out = append(out, policyChange{name: name, path: path, policy: p, err: err})
	}
	return out
}

// containerChoice is what a container's session is given.
type containerChoice struct {
	// label is the sluice.policy label's value; labelled says there is one.
	label    string
	labelled bool
	// requested is the policy to intersect with the machine's: nil for the
	// machine allowlist itself.
	requested *allowlist.Policy
	// problem, when set, says why the container gets loopback only.
	problem string
}

// display is the policy's name as `sluice sessions` shows it.
func (c containerChoice) display() string {
	switch {
	case c.problem != "" && c.labelled:
		return strconv.Quote(c.label) + " (unknown: loopback only)"
	case c.problem != "":
		return "(unreadable: loopback only)"
	case !c.labelled:
		return "(machine)"
	}
	return c.label
}

// loopbackOnly is the policy of a container whose label cannot be honoured.
func loopbackOnly() *allowlist.Policy {
	p, _ := allowlist.New(nil)
	return p
}

// chooseContainerPolicy decides a container's policy from its engine
// record (or the error reading it).
func chooseContainerPolicy(cp *containerPolicies, rec containers.Record, recErr error) containerChoice {
	if recErr != nil {
		return containerChoice{requested: loopbackOnly(),
			problem: fmt.Sprintf("its engine record cannot be read, so its %s label is unknown: %v", containers.PolicyLabel, recErr)}
	}
	label, ok := rec.Policy()
	if !ok {
		return containerChoice{}
	}
	if cp != nil {
		if p, ok := cp.policy(label); ok {
			return containerChoice{label: label, labelled: true, requested: p}
		}
	}
	known := "none are configured"
	if cp != nil && len(cp.paths) > 0 {
		known = "configured: " + strings.Join(cp.names(), ", ")
	}
	return containerChoice{label: label, labelled: true, requested: loopbackOnly(),
		problem: fmt.Sprintf("label %s=%q names no policy in the daemon's container_policies (%s)", containers.PolicyLabel, label, known)}
}
