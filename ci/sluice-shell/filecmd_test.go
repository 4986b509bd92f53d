// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"strings"
	"testing"
)

func TestFilterEnv(t *testing.T) {
	in := "CI_VERSION=1.2\n" +
		"BASH_ENV=/tmp/evil.sh\n" +
		"bash_env=/tmp/evil.sh\n" +
		"NOTES<<EOF\nline one\nBASH_ENV=/tmp/inside-a-value\nEOF\n" +
		"LD_PRELOAD=/tmp/x.so\n" +
		"SLUICE=/tmp/mine\n" +
		"GIT_CONFIG_COUNT=1\n" +
		"https_proxy=http://203.0.113.9:8080\n" +
		"PATH=/tmp/bin:/usr/bin\n" +
		"BASH_FUNC_ls%%=() { evil; }\n" +
		"EVIL<<X\nnever closed\n"
	keep, dropped := filterEnv([]byte(in))
	want := "CI_VERSION=1.2\nNOTES<<EOF\nline one\nBASH_ENV=/tmp/inside-a-value\nEOF\n"
	if string(keep) != want {
		t.Errorf("kept:\n%s\nwant:\n%s", keep, want)
	}
	all := strings.Join(dropped, "\n")
	for _, name := range []string{"BASH_ENV", "bash_env", "LD_PRELOAD", "SLUICE", "GIT_CONFIG_COUNT", "https_proxy", "PATH", "BASH_FUNC_ls%%", "EVIL"} {
		if !strings.Contains(all, name) {
			t.Errorf("no line says %s was dropped:\n%s", name, all)
		}
	}
}

func TestFilterEnvKeepsOrdinary(t *testing.T) {
	in := "A=1\r\nB=x=y\nC<<D\n\nD\nTOKEN_FOR_LATER=abc\n"
	keep, dropped := filterEnv([]byte(in))
	if len(dropped) != 0 {
		t.Errorf("dropped ordinary variables: %v", dropped)
	}
	if want := "A=1\nB=x=y\nC<<D\n\nD\nTOKEN_FOR_LATER=abc\n"; string(keep) != want {
		t.Errorf("kept %q, want %q", keep, want)
	}
}

func TestFilterPath(t *testing.T) {
	writable := map[string]bool{"/home/runner": true, "/home/runner/_work": true, "/tmp": true}
	w := func(p string) bool { return writable[p] }
	in := "/opt/tool/bin\n/home/runner/.local/bin\n/home/runner/_work/_tool/node/bin\nrelative/bin\n/opt/../tmp/bin\n/tmp/x\n"
	keep, dropped := filterPath([]byte(in), []string{"/home/runner/_work/_tool"}, w)
	if want := "/opt/tool/bin\n/home/runner/_work/_tool/node/bin\n"; string(keep) != want {
		t.Errorf("kept %q, want %q", keep, want)
	}
	if len(dropped) != 4 {
		t.Errorf("dropped %d entries, want 4: %v", len(dropped), dropped)
	}
}

func TestDropReasonPrefixes(t *testing.T) {
	for name, drop := range map[string]bool{"LD_LIBRARY_PATH": true, "npm_config_script_shell": true, "GITHUB_TOKEN": true,
		"ACTIONS_ID_TOKEN_REQUEST_URL": true, "ENV": true, "ENVIRONMENT": false, "GOPATH": false, "NODE_ENV": false, "MY_HOME": false} {
		if got := dropReason(name) != ""; got != drop {
			t.Errorf("dropReason(%q) drops=%v, want %v", name, got, drop)
		}
	}
}
