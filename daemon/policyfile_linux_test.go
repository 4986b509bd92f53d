// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPolicyFileRefusesDocker(t *testing.T) {
	dir := t.TempDir()
	with := filepath.Join(dir, "with.json")
	without := filepath.Join(dir, "without.json")
	if err := os.WriteFile(with, []byte(`{"allowed_hosts": ["a.example.com"], "docker": true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(without, []byte(`{"allowed_hosts": ["a.example.com"], "docker": false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := loadPolicyFile(with); err == nil || p != nil || !strings.Contains(err.Error(), "cannot give sessions a Docker socket") {
		t.Errorf("machine policy with docker: %v, %v", p, err)
	}
	if p, err := loadPolicyFile(without); err != nil || p.Len() != 1 {
		t.Errorf("machine policy without docker: %v, %v", p, err)
	}
}
