// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/allowlist"
)

// DefaultHiddenPaths are the credential files and directories every
// session hides unless a run exempts one with --show-path. "~/" is the home
// of the user the command runs as. Each entry is a store of long-lived
// credentials that a command could send to any host it may reach; tools
// that need them work through agents (ssh-agent, gpg-agent, credential
// helpers) or are given them explicitly.
var DefaultHiddenPaths = []string{
	"~/.ssh/id_*",           // ssh private keys (and their .pub twins: harmless to hide, ssh falls back to the agent)
	"~/.aws/credentials",    // AWS access keys
	"~/.config/gcloud",      // Google Cloud credentials and tokens
	"~/.azure",              // Azure CLI tokens
	"~/.kube/config",        // Kubernetes client certificates and tokens
	"~/.docker/config.json", // registry credentials
	"~/.npmrc",              // npm registry tokens
	"~/.netrc",              // passwords for ftp, curl, git over https
	"~/.git-credentials",    // git's plain-text credential store
	"~/.config/gh",          // GitHub CLI tokens
}

// Hidden is the list of path patterns a session hides.
type Hidden struct {
	// Patterns are absolute or "~/" globs (allowlist.CheckHiddenPath): the defaults
	// and the session's own list, which --show-path may exempt.
	Patterns []string
	// Machine are the machine allowlist's patterns, which nothing exempts.
	Machine []string
	// Shown are exempted for this run (--show-path): a path a pattern
	// matches is shown when it is equal to or below one of them.
	Shown []string
}

// HiddenPaths combines the lists: the defaults, the session's own and the
// machine's (each a list an allowlist file gave), without duplicates. shown
// exempts what the defaults and the session's list match, but never what
// the machine's list matches: a session can only hide more than the machine
// says.
func HiddenPaths(machine, session, shown []string) (Hidden, error) {
	var errs []error
	for _, p := range slices.Concat(machine, session, shown) {
		if err := allowlist.CheckHiddenPath(p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return Hidden{}, errors.Join(errs...)
	}
	var h Hidden
	for _, p := range slices.Concat(DefaultHiddenPaths, session) {
		if !slices.Contains(h.Patterns, p) {
			h.Patterns = append(h.Patterns, p)
		}
	}
	for _, p := range machine {
		if !slices.Contains(h.Machine, p) {
			h.Machine = append(h.Machine, p)
		}
	}
	h.Shown = slices.Clone(shown)
	return h, nil
}

// Glob is one expanded pattern: an absolute glob and whether --show-path
// may exempt what it matches.
type Glob struct {
	Pattern    string
	Exemptable bool
}

// Expand turns the patterns into absolute globs for a user whose home is
// home, and the shown paths into absolute paths. Patterns with "~/" are
// dropped when home is empty, "/" or relative (a system user without a
// home keeps no credentials there).
func (h Hidden) Expand(home string) (globs []Glob, shown []string) {
	for _, p := range h.Machine {
		if a, ok := expandHome(p, home); ok {
			globs = append(globs, Glob{Pattern: a})
		}
	}
	for _, p := range h.Patterns {
		if a, ok := expandHome(p, home); ok {
			globs = append(globs, Glob{Pattern: a, Exemptable: true})
		}
	}
	for _, p := range h.Shown {
		if a, ok := expandHome(p, home); ok {
			shown = append(shown, a)
		}
	}
	return globs, shown
}

func expandHome(p, home string) (string, bool) {
	rest, ok := strings.CutPrefix(p, "~/")
	if !ok {
		return p, true
	}
	if home == "" || home == "/" || !filepath.IsAbs(home) {
		return "", false
	}
	return filepath.Join(home, rest), true
}

// Shows reports whether path (absolute, clean) is exempted by one of
// shown: equal to it or below it.
func Shows(path string, shown []string) bool {
	for _, s := range shown {
		if path == s || strings.HasPrefix(path, strings.TrimSuffix(s, "/")+"/") {
			return true
		}
	}
	return false
}

// StartedNote is what a session_started audit line adds about the
// sandbox: the paths it hid ("" for none), so the audit log keeps why a
// command found a credential file empty.
func StartedNote(hidden []string) string {
	if len(hidden) == 0 {
		return ""
	}
	return "; sandbox hid " + strings.Join(hidden, ", ")
}
