// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
)

// The runner's file commands: files whose path the runner gives each
// step in these variables and reads after the step. The runner applies
// $GITHUB_ENV and $GITHUB_PATH to every later step, unconfined ones
// included, so a confined step gets private copies, and what it wrote
// there is filtered (filterEnv, filterPath) before it reaches the real
// files, which sessions see read-only. The others (outputs, state, the
// step summary) steer nothing that starts later and pass unchanged.
var fileCommandVars = []string{"GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY"}

// droppedNames are the names (exact, or a prefix ending in '*') that a
// confined step may not set for later steps through $GITHUB_ENV: each
// changes how a later program starts, what code it loads, where it
// reads its configuration or where its traffic goes, so a step that sets
// it chooses code or a destination for steps that run unconfined after
// it (the finish step, `uses:` steps). The runner itself refuses only
// NODE_OPTIONS. A denylist, so that ordinary variables (CI=1, a version
// number, a token for a later step) keep working; matched without regard
// to case, because several programs read both spellings.
var droppedNames = []struct{ name, why string }{
	// Shells: files and code a later shell reads or runs before its script.
	{"BASH_ENV", "bash runs it before every later bash step"},
	{"ENV", "sh runs it at start"},
	{"BASH_FUNC_*", "an exported bash function replaces a command in later steps"},
	{"SHELLOPTS", "changes how later shells run"},
	{"BASHOPTS", "changes how later shells run"},
	{"PS4", "runs command substitutions when a later shell traces"},
	{"PROMPT_COMMAND", "runs code in later shells"},
	{"IFS", "changes how later scripts split words"},
	{"ZDOTDIR", "zsh reads its start-up files from there"},
	{"INPUTRC", "readline's start-up file"},
	// The dynamic loader and the C library.
	{"LD_*", "the dynamic loader loads or looks up code from it"},
	{"GCONV_PATH", "glibc loads modules from it"},
	{"LOCPATH", "glibc reads locale data from it"},
	{"HOSTALIASES", "changes the host names later programs resolve"},
	{"RES_OPTIONS", "changes how later programs resolve names"},
	{"LOCALDOMAIN", "changes how later programs resolve names"},
	// Interpreters and runtimes: start-up files, options, module paths.
	{"NODE_OPTIONS", "node loads code from its --require"},
	{"NODE_PATH", "node loads modules from it"},
	{"PYTHONSTARTUP", "python runs it"},
	{"PYTHONPATH", "python imports modules from it"},
	{"PYTHONHOME", "python loads its library from it"},
	{"PYTHONUSERBASE", "python imports site packages from it"},
	{"PERL5OPT", "perl takes options (-M) from it"},
	{"PERL5LIB", "perl loads modules from it"},
	{"PERLLIB", "perl loads modules from it"},
	{"PERL5DB", "perl runs it"},
	{"RUBYOPT", "ruby takes options (-r) from it"},
	{"RUBYLIB", "ruby loads code from it"},
	{"JAVA_TOOL_OPTIONS", "the JVM loads agents from it"},
	{"_JAVA_OPTIONS", "the JVM loads agents from it"},
	{"JDK_JAVA_OPTIONS", "the JVM loads agents from it"},
	{"DOTNET_STARTUP_HOOKS", ".NET runs code from it"},
	{"CORECLR_*", ".NET loads a profiler from it"},
	{"COR_*", ".NET loads a profiler from it"},
	{"LUA_INIT*", "lua runs it"},
	{"GOFLAGS", "go runs -toolexec programs from it"},
	{"GOTOOLCHAIN", "go downloads and runs another toolchain"},
	{"RUSTC_WRAPPER", "cargo runs it"},
	{"RUSTC_WORKSPACE_WRAPPER", "cargo runs it"},
	{"CARGO_*", "cargo's configuration, wrappers and home"},
	// Tools that run helpers or install code from where they are told.
	{"GIT_*", "git runs helpers (GIT_SSH_COMMAND, GIT_ASKPASS, GIT_CONFIG_*) from it"},
	{"NPM_CONFIG_*", "npm's configuration (script-shell, node-options, registry)"},
	{"YARN_*", "yarn's configuration"},
	{"PIP_*", "pip's configuration (index, find-links)"},
	{"SSH_*", "ssh's agent and askpass"},
	// Where later programs read their configuration.
	{"HOME", "later programs read their configuration from it"},
	{"XDG_CONFIG_HOME", "later programs read their configuration from it"},
	{"XDG_CONFIG_DIRS", "later programs read their configuration from it"},
	{"CURL_HOME", "curl reads its configuration from it"},
	{"WGETRC", "wget reads its configuration from it"},
	// Where later programs send their traffic.
	{"HTTP_PROXY", "later steps' traffic would go through it"},
	{"HTTPS_PROXY", "later steps' traffic would go through it"},
	{"ALL_PROXY", "later steps' traffic would go through it"},
	{"FTP_PROXY", "later steps' traffic would go through it"},
	{"NO_PROXY", "changes where later steps' traffic goes"},
	// The search path has its own file command ($GITHUB_PATH, filtered).
	{"PATH", "use $GITHUB_PATH"},
	// The runner's and sluice's own settings.
	{"GITHUB_*", "the runner's own settings"},
	{"RUNNER_*", "the runner's own settings"},
	{"ACTIONS_*", "the runner's own settings (tokens and service addresses)"},
	{"SLUICE", "the sluice binary of later steps"},
	{"SLUICE_*", "sluice's own settings"},
}

// dropReason says why a confined step may not set name for later
// steps, or "".
func dropReason(name string) string {
	u := strings.ToUpper(name)
	for _, d := range droppedNames {
		if p, ok := strings.CutSuffix(d.name, "*"); ok {
			if strings.HasPrefix(u, p) {
				return d.why
			}
		} else if u == d.name {
			return d.why
		}
	}
	return ""
}

// filterEnv parses what a step wrote to its $GITHUB_ENV (the runner's
// format: NAME=VALUE lines and NAME<<DELIMITER blocks) and returns the
// entries later steps may get, in the same format, and a line for each
// entry it dropped. Malformed content (which the runner would reject,
// failing the step) is dropped too, and said.
func filterEnv(b []byte) (keep []byte, dropped []string) {
	var out bytes.Buffer
	lines := strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if line == "" {
			continue
		}
		var name string
		var entry []string
		if n, v, ok := strings.Cut(line, "="); ok && (!strings.Contains(n, "<<") || strings.Index(line, "=") < strings.Index(line, "<<")) {
			name, entry = n, []string{n + "=" + v}
		} else if n, delim, ok := strings.Cut(line, "<<"); ok && delim != "" {
			end := -1
			for k := i + 1; k < len(lines); k++ {
				if lines[k] == delim {
					end = k
					break
				}
			}
			if end < 0 {
				dropped = append(dropped, fmt.Sprintf("%s: no closing %q line", n, delim))
				break
			}
			name, entry = n, lines[i:end+1]
			i = end
		} else {
			dropped = append(dropped, fmt.Sprintf("line %q: neither NAME=VALUE nor NAME<<DELIMITER", truncate(line)))
			continue
		}
		if !validName(name) {
			dropped = append(dropped, fmt.Sprintf("%q: not a variable name", truncate(name)))
			continue
		}
		if why := dropReason(name); why != "" {
			dropped = append(dropped, name+": "+why)
			continue
		}
		out.WriteString(strings.Join(entry, "\n") + "\n")
	}
	return out.Bytes(), dropped
}

// filterPath returns the $GITHUB_PATH entries later steps may get: an
// absolute, clean directory that no confined step can change, that is,
// one the job's user cannot write, nor any directory above it (which
// would let a step rename it away and put its own in its place), unless
// it lies below a path every session sees read-only (protected, where
// the mounts also pin the directories above). writable reports whether
// the job's user may write a directory.
func filterPath(b []byte, protected []string, writable func(string) bool) (keep []byte, dropped []string) {
	var out bytes.Buffer
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n") {
		if line == "" {
			continue
		}
		if !filepath.IsAbs(line) || filepath.Clean(line) != line {
			dropped = append(dropped, fmt.Sprintf("%q: not an absolute, clean path", truncate(line)))
			continue
		}
		if below(line, protected) {
			out.WriteString(line + "\n")
			continue
		}
		if w := firstWritable(line, writable); w != "" {
			dropped = append(dropped, fmt.Sprintf("%s: a confined step can write %s", line, w))
			continue
		}
		out.WriteString(line + "\n")
	}
	return out.Bytes(), dropped
}

// firstWritable is dir or the first directory above it that writable
// says yes to, or "".
func firstWritable(dir string, writable func(string) bool) string {
	for p := dir; ; p = filepath.Dir(p) {
		if writable(p) {
			return p
		}
		if p == "/" {
			return ""
		}
	}
}

// below reports whether p is one of roots or lies below one.
func below(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// validName is a shell variable name, as the runner's env file wants.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
