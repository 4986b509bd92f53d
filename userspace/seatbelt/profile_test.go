// SPDX-License-Identifier: Apache-2.0

package seatbelt

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.sb from Generate")

// goldenCases are the profiles kept in testdata, by file name.
var goldenCases = map[string]Profile{
	"proxy-only":     {ProxyPort: 8080},
	"loopback-ports": {ProxyPort: 8080, LoopbackPorts: []uint16{5432, 3000, 3000, 8080}},
	"all-loopback":   {ProxyPort: 8080, LoopbackPorts: []uint16{3000}, AllLoopback: true},
	"system-dns":     {ProxyPort: 8080, AllowSystemDNS: true},
}

func TestGolden(t *testing.T) {
	for name, p := range goldenCases {
		t.Run(name, func(t *testing.T) {
			got, err := Generate(p)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".sb")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("Generate(%+v) differs from %s (go test -update rewrites it):\n%s", p, path, got)
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	for _, p := range []Profile{{}, {ProxyPort: 8080, LoopbackPorts: []uint16{0}}} {
		if _, err := Generate(p); err == nil {
			t.Errorf("Generate(%+v): no error", p)
		}
	}
}

// rules returns the profile's non-comment, non-empty lines.
func rules(profile string) []string {
	var out []string
	for _, l := range strings.Split(profile, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, ";") {
			out = append(out, l)
		}
	}
	return out
}

// TestStructure checks what the policy depends on, for every golden case:
// each rule is one balanced form; the blanket deny comes before every
// network allow (the last match wins); the resolver denies come after the
// Unix-socket allow they carve out of; nothing but loopback is allowed.
func TestStructure(t *testing.T) {
	for name, p := range goldenCases {
		profile, err := Generate(p)
		if err != nil {
			t.Fatal(err)
		}
		rs := rules(profile)
		if rs[0] != "(version 1)" || rs[1] != "(allow default)" {
			t.Errorf("%s: starts with %q", name, rs[:2])
		}
		deny := slices.Index(rs, "(deny network-outbound)")
		unix := slices.IndexFunc(rs, func(r string) bool { return strings.Contains(r, "(remote unix-socket (path-regex") })
		for i, r := range rs {
			if strings.Count(r, "(") != strings.Count(r, ")") || !strings.HasPrefix(r, "(") || !strings.HasSuffix(r, ")") {
				t.Errorf("%s: unbalanced rule %q", name, r)
			}
			if strings.HasPrefix(r, "(allow network") {
				if i < deny {
					t.Errorf("%s: %q comes before the blanket deny", name, r)
				}
				if !strings.Contains(r, `"localhost:`) && i != unix {
					t.Errorf("%s: allows more than loopback: %q", name, r)
				}
			}
			if strings.Contains(r, "mDNSResponder") && strings.HasPrefix(r, "(deny") && i < unix {
				t.Errorf("%s: resolver deny %q before the Unix-socket allow", name, r)
			}
		}
		hasDNSDeny := strings.Contains(profile, `(deny mach-lookup (global-name "com.apple.dnssd.service"))`)
		if hasDNSDeny == p.AllowSystemDNS {
			t.Errorf("%s: AllowSystemDNS=%v but resolver deny present=%v", name, p.AllowSystemDNS, hasDNSDeny)
		}
	}
}

func TestCommand(t *testing.T) {
	cmd, err := Command("(version 1)", []string{"curl", "-v"})
	if runtime.GOOS != "darwin" {
		if err == nil {
			t.Errorf("Command on %s: no error", runtime.GOOS)
		}
		return
	}
	if err != nil {
		t.Skipf("no sandbox-exec: %v", err)
	}
	want := []string{"/usr/bin/sandbox-exec", "-p", "(version 1)", "--", "curl", "-v"}
	if !slices.Equal(cmd.Args, want) {
		t.Errorf("Args = %q, want %q", cmd.Args, want)
	}
	if _, err := Command("", []string{"curl"}); err == nil {
		t.Error("empty profile: no error")
	}
	if _, err := Command("(version 1)", nil); err == nil {
		t.Error("no command: no error")
	}
}
