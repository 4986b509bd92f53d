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
			out := goList(t, goBin, goos)
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

// goList is `go list` of every package of the module for goos: one line
// a package, its import path then every package it depends on.
func goList(t *testing.T, goBin, goos string) []byte {
	t.Helper()
	cmd := exec.Command(goBin, "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, modulePath+"/...")
	cmd.Env = append(os.Environ(), "GOOS="+goos)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderrOf(err))
	}
	return out
}

// rooms are the module's folders that keep one job, each with the rooms
// it must never depend on (directly or through another package), so that
// the import graph runs one way: the sandbox's primitives below the
// sessions that use them, the proxy beside the sandbox rather than on
// top of it, the modes without BPF away from the datapath, and small
// helpers below everything. A room is a folder and every package under
// it.
var rooms = []struct {
	room  string
	never []string
}{
	{"sandbox", []string{"enforcer", "daemon", "api", "proxy", "userspace", "dnsresolver", "loader", "cmd", "ci"}},
	{"sandbox/seccomp", []string{""}}, // assembled from UAPI values alone
	{"proxy", []string{"enforcer", "daemon", "api", "sandbox", "userspace", "loader", "dnsresolver", "cmd", "ci"}},
	// The verifier judges bytes against a policy: no datapath, no session.
	{"namecheck", []string{"enforcer", "daemon", "api", "sandbox", "userspace", "loader", "dnsresolver", "proxy", "sessions", "cmd", "ci"}},
	// The Docker broker judges and forwards requests: no datapath, no
	// session; the session service attaches what it starts.
	{"dockerbroker", []string{""}},
	{"userspace", []string{"enforcer", "daemon", "api", "loader", "cmd", "ci"}},
	{"netns", []string{""}},
	{"internal/atomicfile", []string{""}},
	{"internal/strictjson", []string{""}},
	{"enforcer", []string{"daemon", "api", "cmd", "ci"}},
	{"api", []string{"daemon", "enforcer", "sandbox", "cmd", "ci"}},
	// The session service is below both front doors.
	{"sessions", []string{"daemon", "cmd", "ci", "report", "suggest"}},
	{"report", []string{"daemon", "enforcer", "sessions", "sandbox", "cmd", "ci"}},
	// The machine's checks only look: they start no session.
	{"preflight", []string{"daemon", "sessions", "report", "suggest", "cmd", "ci"}},
	{"suggest", []string{"daemon", "enforcer", "sessions", "sandbox", "report", "cmd", "ci"}},
}

// TestRoomsImportOneWay holds the rooms' rules on every platform sluice
// builds for. "" in never stands for the whole module.
func TestRoomsImportOneWay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list the packages: %v", err)
	}
	in := func(pkg, room string) bool {
		full := modulePath + "/" + room
		return pkg == full || strings.HasPrefix(pkg, full+"/")
	}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		t.Run(goos, func(t *testing.T) {
			seen := map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(string(goList(t, goBin, goos))), "\n") {
				fields := strings.Fields(line)
				pkg, deps := fields[0], fields[1:]
				for _, r := range rooms {
					if !in(pkg, r.room) {
						continue
					}
					seen[r.room] = true
					for _, dep := range deps {
						if !strings.HasPrefix(dep, modulePath+"/") || in(dep, r.room) {
							continue
						}
						for _, never := range r.never {
							if never == "" || in(dep, never) {
								t.Errorf("GOOS=%s: %s depends on %s: the %s room must not depend on %s", goos, pkg, dep, r.room, map[bool]string{true: "the rest of the module", false: never}[never == ""])
							}
						}
					}
				}
			}
			for _, r := range rooms {
				if !seen[r.room] {
					t.Errorf("GOOS=%s: no package in the room %s: the rule checked nothing", goos, r.room)
				}
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
	for _, must := range []string{"daemon/handlers_linux.go", "cmd/sluice/run_linux.go", "cmd/sluice/run_userspace.go"} {
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

// notForCommands are the rooms the commands reach only through another:
// a userspace session's proxy and backend are the session service's
// (sessions.StartUserspace), the machine's probes of containers and
// Landlock audit are preflight's.
var notForCommands = []string{"proxy", "userspace/seatbelt", "userspace/wfp", "containers", "kaudit"}

// TestCommandsStartNoCommand holds that cmd/sluice is commands: none of
// its files starts a program (os/exec's Command or CommandContext; the
// session service starts a session's command, in every mode) or imports
// a room in notForCommands.
func TestCommandsStartNoCommand(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	read := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		read[name] = true
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, room := range notForCommands {
				if p == modulePath+"/"+room {
					t.Errorf("%s imports %s: the commands reach it through the session service or preflight", name, p)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "exec" && (sel.Sel.Name == "Command" || sel.Sel.Name == "CommandContext") {
				t.Errorf("%s: exec.%s: a command is started by the session service (package sessions), not by cmd/sluice", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	for _, must := range []string{"run_userspace.go", "check.go"} {
		if !read[must] {
			t.Errorf("%s was not read: the rule checked nothing there", must)
		}
	}
}
