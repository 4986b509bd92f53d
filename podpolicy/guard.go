// SPDX-License-Identifier: Apache-2.0

package podpolicy

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/internal/strictjson"
)

// GuardKey is the ConfigMap key (a file of the mounted directory) that
// holds the guard; every other NAME.json key is the policy NAME.
const GuardKey = "namespaces.json"

// Annotation is the pod annotation that chooses a policy by name, where
// the pod's namespace lets it.
const Annotation = "sluice.dev/policy"

// Namespace is the guard's rule for one namespace (or a pattern of them).
type Namespace struct {
	// Default is the policy a pod of the namespace gets when it chooses
	// none; empty: such a pod is refused.
	Default string `json:"default,omitempty"`
	// Selectable are the policies the annotation may choose; empty: the
	// annotation is refused, whatever it names.
	Selectable []string `json:"selectable,omitempty"`
}

// Guard is the parsed namespaces.json: which namespaces are confined and
// how their pods choose a policy.
type Guard struct {
	// Namespaces maps an exact namespace name, or a pattern ending in
	// "*" (a prefix: "ci-*"), to its rule. An exact name wins over every
	// pattern, and the longest matching pattern over shorter ones.
	Namespaces map[string]Namespace `json:"namespaces"`
}

// parseGuard decodes namespaces.json strictly: an unknown key, a bad
// pattern or a rule naming a policy that does not exist is an error, so a
// typo never leaves a namespace unguarded or its pods refused by surprise.
func parseGuard(data []byte, policies map[string]bool) (*Guard, error) {
	var raw struct {
		Namespaces map[string]json.RawMessage `json:"namespaces"`
	}
	if err := strictjson.Decode(data, &raw); err != nil {
		return nil, err
	}
	g := Guard{Namespaces: map[string]Namespace{}}
	if raw.Namespaces == nil {
		g.Namespaces = nil
	}
	for pat, r := range raw.Namespaces {
		var rule Namespace
		if err := strictjson.Decode(r, &rule); err != nil {
			return nil, fmt.Errorf("namespace %q: %w", pat, err)
		}
		g.Namespaces[pat] = rule
	}
	if g.Namespaces == nil {
		return nil, fmt.Errorf(`no "namespaces" object: a guard that confines nothing is written as {"namespaces": {}}`)
	}
	for _, pat := range slices.Sorted(maps.Keys(g.Namespaces)) {
		if err := checkPattern(pat); err != nil {
			return nil, fmt.Errorf("namespace %q: %w", pat, err)
		}
		rule := g.Namespaces[pat]
		if policies == nil {
			continue // ParseGuard: the policies are not known here
		}
		if rule.Default != "" && !policies[rule.Default] {
			return nil, fmt.Errorf("namespace %q: default policy %q is not in the ConfigMap (no key %s.json)", pat, rule.Default, rule.Default)
		}
		for _, s := range rule.Selectable {
			if !policies[s] {
				return nil, fmt.Errorf("namespace %q: selectable policy %q is not in the ConfigMap (no key %s.json)", pat, s, s)
			}
		}
	}
	return &g, nil
}

// checkPattern accepts a namespace name (an RFC 1123 label, as Kubernetes
// requires) or such a prefix followed by one "*".
func checkPattern(p string) error {
	name := strings.TrimSuffix(p, "*")
	if strings.Contains(name, "*") {
		return fmt.Errorf(`only a trailing "*" is a pattern`)
	}
	if name == "" {
		if p == "*" {
			return nil // every namespace
		}
		return fmt.Errorf("empty namespace name")
	}
	if len(name) > 63 {
		return fmt.Errorf("longer than 63 characters")
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0
		if !ok {
			return fmt.Errorf("%q is not a namespace name (lower-case letters, digits and '-')", name)
		}
	}
	return nil
}

// rule returns the guard's rule for namespace ns and the pattern that
// matched it.
func (g *Guard) rule(ns string) (Namespace, string, bool) {
	if g == nil {
		return Namespace{}, "", false
	}
	if r, ok := g.Namespaces[ns]; ok && !strings.HasSuffix(ns, "*") {
		return r, ns, true
	}
	best, found := "", false
	for pat := range g.Namespaces {
		if !strings.HasSuffix(pat, "*") {
			continue
		}
		if ok, _ := path.Match(pat, ns); !ok || strings.Contains(ns, "/") {
			continue
		}
		if !found || len(pat) > len(best) || len(pat) == len(best) && pat < best {
			best, found = pat, true
		}
	}
	return g.Namespaces[best], best, found
}

// ParseGuard reads a guard on its own, as the fail-closed hook does from
// the copy the agent leaves on the host (DefaultGuardFile): its patterns and
// rules are checked, the policies it names are not (the hook has none).
func ParseGuard(data []byte) (*Guard, error) {
	return parseGuard(data, nil)
}

// Guards reports whether namespace ns is guarded.
func (g *Guard) Guards(ns string) bool {
	_, _, ok := g.rule(ns)
	return ok
}

// Marshal is the guard as namespaces.json, for DefaultGuardFile.
func (g *Guard) Marshal() ([]byte, error) {
	if g == nil {
		g = &Guard{Namespaces: map[string]Namespace{}}
	}
	return json.MarshalIndent(g, "", "  ")
}
