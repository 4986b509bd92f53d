// SPDX-License-Identifier: Apache-2.0

package podpolicy

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/allowlist"
)

// maxFile bounds one file of the directory: a ConfigMap holds at most
// 1 MiB in all, so anything larger is not one.
const maxFile = 1 << 20

// Set is one consistent reading of the policy directory: the guard and
// every named policy.
type Set struct {
	// Guard is namespaces.json; nil when the directory has none (no
	// namespace is guarded).
	Guard *Guard
	// Policies are the named allowlists, NAME.json -> NAME.
	Policies map[string]*allowlist.Policy
	// Digest identifies the bytes read, so a caller can tell a change
	// from a re-read of the same files.
	Digest [sha256.Size]byte
}

// Names returns the policies' names, sorted.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.Policies))
}

// Load reads the mounted ConfigMap in dir. Files whose names start with
// ".." are the kubelet's own (its atomic-update directories) and files not
// ending in .json are not policies: both are skipped. Any malformed file
// makes the whole reading fail, naming every problem, so that a caller
// keeps the last good Set and a half-written policy never applies.
func Load(dir string) (*Set, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read policy directory: %w", err)
	}
	files := map[string][]byte{}
	var errs []error
	for _, de := range ents {
		name := de.Name()
		if strings.HasPrefix(name, "..") || !strings.HasSuffix(name, ".json") {
			continue
		}
		data, err := readFile(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		files[name] = data
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return Parse(files)
}

// readFile reads one regular file (a ConfigMap key is a symlink into the
// kubelet's data directory: followed), bounded.
func readFile(p string) ([]byte, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	if st.Size() > maxFile {
		return nil, fmt.Errorf("%s: %d bytes, more than a ConfigMap holds", p, st.Size())
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return data, nil
}

// Parse builds a Set from a ConfigMap's data: key -> bytes. Keys are
// NAME.json policies and the guard namespaces.json; any other key is an
// error, as is any malformed value.
func Parse(files map[string][]byte) (*Set, error) {
	s := &Set{Policies: map[string]*allowlist.Policy{}}
	h := sha256.New()
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(files)) {
		data := files[key]
		fmt.Fprintf(h, "%s\x00%d\x00", key, len(data))
		h.Write(data)
		if key == GuardKey {
			continue
		}
		name, ok := strings.CutSuffix(key, ".json")
		if !ok {
			errs = append(errs, fmt.Errorf("%s: not a policy (NAME.json) nor %s", key, GuardKey))
			continue
		}
		if err := CheckName(name); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		p, err := allowlist.Parse(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		s.Policies[name] = p
	}
	if data, ok := files[GuardKey]; ok {
		known := map[string]bool{}
		for _, key := range slices.Collect(maps.Keys(files)) {
			if name, ok := strings.CutSuffix(key, ".json"); ok && key != GuardKey {
				known[name] = true
			}
		}
		g, err := parseGuard(data, known)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", GuardKey, err))
		}
		s.Guard = g
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	copy(s.Digest[:], h.Sum(nil))
	return s, nil
}

// CheckName accepts a policy name: what a pod's annotation may carry and
// a ConfigMap key may start with (letters, digits, '-', '_', '.'; not
// "namespaces", the guard's key; at most 63 bytes, so it fits a label).
func CheckName(name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("a policy name is 1 to 63 characters")
	}
	if name == strings.TrimSuffix(GuardKey, ".json") {
		return fmt.Errorf("%q is the guard's key, not a policy", name)
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			i > 0 && (c == '-' || c == '_' || c == '.')
		if !ok {
			return fmt.Errorf("policy name %q: letters, digits, and '-', '_', '.' after the first", name)
		}
	}
	return nil
}

// guardOrEmpty is the set's guard, or one that guards nothing.
func (s *Set) guardOrEmpty() *Guard {
	if s == nil || s.Guard == nil {
		return &Guard{Namespaces: map[string]Namespace{}}
	}
	return s.Guard
}

// GuardJSON is the set's guard as the fail-closed hook reads it
// (ParseGuard); an empty guard when the set has none.
func (s *Set) GuardJSON() ([]byte, error) { return s.guardOrEmpty().Marshal() }

// DefaultGuardFile is where the node agent keeps a copy of the guard in
// force for the fail-closed OCI hook (`sluice node hook`), which the
// runtime runs on the host with no agent to ask. It is on disk, not below
// the state directory (/run, a tmpfs): after a reboot the kubelet starts
// pods before the agent's own, and a hook that found no guard would let a
// guarded pod run unconfined.
const DefaultGuardFile = "/var/lib/sluice/node/namespaces.json"
