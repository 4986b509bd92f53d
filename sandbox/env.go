// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"strings"
)

// SecretEnvName reports whether an environment variable's name looks like
// it holds a secret: it ends in _TOKEN, _KEY or _SECRET, or contains
// PASSWORD (all compared in upper case, so GitHub_Token counts). Names
// that are exactly TOKEN, KEY or SECRET count too.
func SecretEnvName(name string) bool {
	n := strings.ToUpper(name)
	if strings.Contains(n, "PASSWORD") {
		return true
	}
	for _, s := range []string{"TOKEN", "KEY", "SECRET"} {
		if n == s || strings.HasSuffix(n, "_"+s) {
			return true
		}
	}
	return false
}

// ScrubEnv returns env without the variables SecretEnvName flags, and the
// names it removed (for a notice to the user). env is not changed.
func ScrubEnv(env []string) (kept, removed []string) {
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if SecretEnvName(name) {
			removed = append(removed, name)
			continue
		}
		kept = append(kept, kv)
	}
	return kept, removed
}
