// SPDX-License-Identifier: Apache-2.0

package main

import (
	"go/ast"
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
			for _, must := range []string{"api", "audit", "enforcer", "sessions"} {
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

// TestOneSessionLifecycle holds the house rule that a session's
// command is started in one place, the session service (package
// sessions): no other package of the module (the enforcer itself, which
// defines them, and the tests aside) builds an enforcer.CommandSpec or
// calls NewSession with enforcer.Options. The daemon and `sluice run`
// are front doors to the service; a second lifecycle would drift from
// the first, as it once did.
func TestOneSessionLifecycle(t *testing.T) {
	root := filepath.Join("..", "..")
	found := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "tests", "sessions", "enforcer", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		found[rel] = true
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if isEnforcer(n.Type, "CommandSpec") {
					t.Errorf("%s: builds an enforcer.CommandSpec: start commands through the session service (package sessions)", fset.Position(n.Pos()))
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if ok && sel.Sel.Name == "NewSession" && len(n.Args) == 1 {
					if lit, ok := n.Args[0].(*ast.CompositeLit); ok && isEnforcer(lit.Type, "Options") {
						t.Errorf("%s: creates an enforcer session: create sessions through the session service (package sessions)", fset.Position(n.Pos()))
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"daemon/handlers_linux.go", "cmd/sluice/run_linux.go"} {
		if !found[must] {
			t.Errorf("%s was not read: the rule checked nothing there", must)
		}
	}
}

// isEnforcer reports whether x is the expression enforcer.NAME.
func isEnforcer(x ast.Expr, name string) bool {
	sel, ok := x.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == "enforcer" && sel.Sel.Name == name
}
