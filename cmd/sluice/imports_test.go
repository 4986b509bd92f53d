// SPDX-License-Identifier: Apache-2.0

package main

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	modulePath  = "github.com/sluice-dev/sluice"
	daemonPkg   = modulePath + "/daemon"
	daemonFile  = "daemon_linux.go" // `sluice daemon`: the one file that may start the server
	commandsPkg = modulePath + "/cmd/sluice"
)

// TestOnlyTheDaemonCommandImportsTheServer holds the house rule that the
// CLI reaches the daemon's server only from the `daemon` subcommand: the
// embedded `run` path and the client commands use the api, audit and
// enforcer packages, none of which may depend on the daemon.
func TestOnlyTheDaemonCommandImportsTheServer(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == daemonPkg && f != daemonFile {
				t.Errorf("%s imports %s: only %s (the daemon subcommand) may", f, daemonPkg, daemonFile)
			}
		}
	}
}

// TestNoPackageButTheCLIDependsOnTheServer checks, with go list on every
// platform sluice builds for, that no package of the module other than
// the daemon itself and the CLI binary depends on the daemon: in
// particular api, audit and enforcer, which the embedded path uses.
func TestNoPackageButTheCLIDependsOnTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	// go test puts its own toolchain first in the test's PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list the packages: %v", err)
	}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		t.Run(goos, func(t *testing.T) {
			cmd := exec.Command(goBin, "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, modulePath+"/...")
			cmd.Env = append(os.Environ(), "GOOS="+goos)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, stderrOf(err))
			}
			checked := 0
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				fields := strings.Fields(line)
				pkg, deps := fields[0], fields[1:]
				if pkg == daemonPkg || pkg == commandsPkg || strings.HasPrefix(pkg, modulePath+"/tests/") {
					continue
				}
				checked++
				if slices.Contains(deps, daemonPkg) {
					t.Errorf("GOOS=%s: %s depends on %s", goos, pkg, daemonPkg)
				}
			}
			for _, must := range []string{"api", "audit", "enforcer"} {
				if !strings.Contains(string(out), modulePath+"/"+must+" ") && !strings.Contains(string(out), modulePath+"/"+must+"\n") {
					t.Errorf("GOOS=%s: go list did not list %s/%s: the rule checked nothing there", goos, modulePath, must)
				}
			}
			if checked == 0 {
				t.Fatalf("GOOS=%s: no package checked", goos)
			}
		})
	}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
