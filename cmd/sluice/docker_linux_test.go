// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// "docker": true in the allowlist file is --docker, checks included: a
// mode that cannot confine the engine's containers is refused before
// anything runs, as it is for the flag.
func TestRunDockerFromAllowlistFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		doc, want string
	}{
		{`{"allowed_hosts": [], "docker": true}`, "--docker needs mode bpf (not proxy)"},
		{`{"allowed_hosts": [], "docker": "yes"}`, `"docker" must be true or false`},
	} {
		f := filepath.Join(dir, "policy.json")
		if err := os.WriteFile(f, []byte(tc.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := newRootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"run", "--mode", "proxy", "--allowlist", f, "--", "/bin/true"})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q\n%s", tc.doc, err, tc.want, out.String())
		}
	}
}
