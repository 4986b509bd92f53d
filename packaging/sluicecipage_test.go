// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestSluiceCIManPageCoversItsUsage: sluice-ci's man page (a hand-written
// page: the script is bash, not a cobra command) documents every command
// and every setting that the usage text at the top of ci/sluice-ci names,
// so a new setting cannot ship undocumented; and it renders without
// warnings where man(1) is installed.
func TestSluiceCIManPageCoversItsUsage(t *testing.T) {
	script, err := os.ReadFile("../ci/sluice-ci")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("sluice-ci.1")
	if err != nil {
		t.Fatal(err)
	}
	// The usage text: the comment block up to the first code line.
	usage, _, _ := strings.Cut(string(script), "\nset -euo pipefail")
	cmds := regexp.MustCompile(`(?m)^#\s+sluice-ci ([a-z]+)`).FindAllStringSubmatch(usage, -1)
	settings := regexp.MustCompile(`(?m)^#\s+(SLUICE[A-Z_]*)\s`).FindAllStringSubmatch(usage, -1)
	if len(cmds) < 6 || len(settings) < 10 {
		t.Fatalf("read %d commands and %d settings from the usage text: has its layout changed?", len(cmds), len(settings))
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(page), "\n") {
		lines[strings.ReplaceAll(l, `\-`, "-")] = true
	}
	for _, c := range cmds {
		if !lines[".B sluice-ci "+c[1]] && !lines[".B sluice-ci "+c[1]+" --"] {
			t.Errorf("SYNOPSIS lacks %q", "sluice-ci "+c[1])
		}
		found := false
		for l := range lines {
			if l == ".B "+c[1] || strings.HasPrefix(l, ".BI \""+c[1]+" ") {
				found = true
			}
		}
		if !found {
			t.Errorf("COMMANDS lacks %s", c[1])
		}
	}
	for _, s := range settings {
		if !lines[".B "+s[1]] {
			t.Errorf("ENVIRONMENT lacks %s", s[1])
		}
	}
	if _, err := exec.LookPath("man"); err != nil {
		return
	}
	var stderr bytes.Buffer
	cmd := exec.Command("man", "--warnings", "-l", "sluice-ci.1")
	cmd.Env = append(os.Environ(), "MANPAGER=cat", "MANWIDTH=80")
	cmd.Stdout, cmd.Stderr = nil, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("man --warnings: %v\n%s", err, stderr.String())
	}
}
