// SPDX-License-Identifier: Apache-2.0

package daemon

import "testing"

// Only a container engine's 64-hex-digit ids are taken for containers:
// sluice's own sessions and anything else under the root are not.
func TestContainerName(t *testing.T) {
	id := "81d28f751ab5a758fe270b871b012701530f2b91ec5393e27b11b7e6f65b96de"
	for name, want := range map[string]bool{
		id:                        true,
		"run-1160-b288aae2232c":   false,
		id[:63]:                   false,
		id + "0":                  false,
		"81D28F751AB5" + id[12:]:  false,
		"docker-" + id + ".scope": false,
	} {
		if got := containerName.MatchString(name); got != want {
			t.Errorf("containerName(%q) = %v, want %v", name, got, want)
		}
	}
}
